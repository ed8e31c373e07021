"""QA requests from real articles and tolerant parsing of the answers; the contradiction check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.contradiction import LLMContradictionChecker, read_verdict
from pipeline.generate.items import QAItem, Reject
from pipeline.generate.prompts import prompt_hash
from pipeline.generate.qa import (
    RETRY_TEMPERATURE,
    QATask,
    changed_qa_task,
    changed_spans,
    initial_qa_task,
    new_qa_task,
    parse_qa,
    retry_qa_task,
)
from pipeline.generate.selection import Article, changed_pairs, group_new_sentences
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.models.llm.base import LLMResponse
from pipeline.models.llm.scripted import ScriptedBackend
from tests.generate.conftest import NEW, OLD
from tests.scripted_llm import good_answer, user_text

pytestmark = pytest.mark.slow  # builds and labels a real workdir (spaCy, MiniLM)

CFG = GenerationConfig()
GEN = "scripted:scripted"


@pytest.fixture(scope="module")
def updated(gen_source_workdir: Path) -> list[Article]:
    _, arts, _ = attach_labels(gen_source_workdir, OLD, NEW, load_articles(gen_source_workdir, NEW))
    return arts


@pytest.fixture(scope="module")
def article(updated: list[Article]) -> Article:
    """The updated article with the most new sentences."""
    return max(updated, key=lambda a: sum(lab == "new" for lab in a.labels.values()))


def _answer(task: QATask, text: str) -> QAItem | Reject:
    backend = ScriptedBackend(lambda _: text)
    return parse_qa(task, backend.complete_many([task.request])[0], GEN)


def _context_of(prompt: str) -> str:
    return prompt.split("Context: ")[-1].split("\nAdded sentences:")[0]


def _initial_task(article: Article) -> QATask:
    para = next(p for p in article.paragraphs() if len(p.sent_idx) >= 2)
    return initial_qa_task(article, para, CFG)


def test_initial_request_numbers_the_paragraph_with_article_indices(article: Article) -> None:
    task = _initial_task(article)
    text = user_text(task.request)
    for i in task.offered:
        assert f"[{i}] {article.texts[i]}" in text
    assert f"Article title: {article.title}" in text
    assert f"at most {CFG.answer_max_words} words" in task.request.messages[-1]["content"]
    assert task.request.prompt_hash == prompt_hash("qa_initial")
    assert task.request.json_schema and "evidence" in task.request.json_schema["properties"]


def test_new_request_with_and_without_source_context(article: Article) -> None:
    group = group_new_sentences(article, 6)[0]
    with_ctx = user_text(new_qa_task(article, group, CFG).request)
    without = user_text(
        new_qa_task(article, group, CFG.model_copy(update={"source_context": False})).request
    )
    own = next(p for p in article.paragraphs() if p.para_idx == group.para_idx)
    assert own.text in _context_of(with_ctx)
    assert _context_of(without) == "(none)"
    for i, t in zip(group.sent_idx, group.texts, strict=True):
        assert f"[{i}] {t}" in without


def test_good_answers_become_items(article: Article, updated: list[Article]) -> None:
    group = group_new_sentences(article, 6)[0]
    task = new_qa_task(article, group, CFG)
    item = _answer(task, good_answer(task.request))
    assert isinstance(item, QAItem)
    assert (item.type, item.origin, item.previous_answer) == ("new", "new_sentences", None)
    assert set(item.evidence_sent_idx) <= set(group.sent_idx)
    assert item.evidence_text == " ".join(article.texts[i] for i in item.evidence_sent_idx)
    assert item.prompt_hash == prompt_hash("qa_new") and item.generator == GEN
    assert item.old_evidence_sent_idx == [] and item.old_evidence_text is None
    assert len(item.item_id) == 16

    art = next(a for a in updated if changed_pairs(a))
    pair = changed_pairs(art)[0]
    ctask = changed_qa_task(art, pair, CFG, OLD)
    text = user_text(ctask.request)
    assert f"EARLIER: {pair.old_text}" in text and f"CURRENT: {pair.new_text}" in text
    assert f"Changed: {changed_spans(pair.old_text, pair.new_text)}" in text
    changed = _answer(ctask, json.dumps({"question": "Q?", "previous_answer": "A", "answer": "B"}))
    assert isinstance(changed, QAItem)
    assert (changed.type, changed.origin) == ("changed", "changed_sentence")
    assert (changed.previous_answer, changed.answer) == ("A", "B")
    assert changed.evidence_sent_idx == [pair.new_idx]
    assert changed.evidence_text == pair.new_text
    assert changed.old_evidence_sent_idx == [pair.old_idx]
    assert changed.old_evidence_text == pair.old_text
    assert changed.previous_snapshot == OLD


def test_a_rejected_answer_is_asked_again_with_what_was_wrong(article: Article) -> None:
    task = _initial_task(article)
    retry = retry_qa_task(task, "answer_in_question", seed=7)
    assert retry is not None and retry.article is article and retry.offered == task.offered
    request, first = retry.request, task.request
    # the same conversation, the note on the last user message just before its "Answer:" cue
    assert request.messages[:-1] == first.messages[:-1]
    before, after = first.messages[-1]["content"], request.messages[-1]["content"]
    assert after.endswith("\nAnswer:") and after.startswith(before.removesuffix("Answer:").rstrip())
    assert "rejected: its answer already appears in the question." in after
    assert (request.temperature, request.seed) == (RETRY_TEMPERATURE, 7)  # sampled, repeatable
    assert 0 < RETRY_TEMPERATURE < 1
    assert request.cache_key("b", "m") != first.cache_key("b", "m")
    assert request.purpose == "qa_retry" and request.schema_name == "qa_initial"
    assert request.json_schema == first.json_schema
    assert request.prompt_hash == f"{prompt_hash('qa_initial')}+{prompt_hash('qa_retry')}"
    # a reason without a hint of its own is described in the rejects table's words
    other = retry_qa_task(task, "contains_url")
    assert other is not None and "URL" in other.request.messages[-1]["content"]
    # a failed request or a duplicate question is not worth another request
    assert retry_qa_task(task, "llm_error") is None
    assert retry_qa_task(task, "duplicate") is None
    # the retry's answer becomes an item like any other, carrying both prompt hashes
    item = _answer(retry, good_answer(retry.request))
    assert isinstance(item, QAItem) and item.prompt_hash == request.prompt_hash


@pytest.mark.parametrize(
    ("old", "new", "shown"),
    [
        (
            "As of October 2023, the Standard Range RWD, Long Range AWD and the Performance "
            "models are currently being offered for sale.",
            "As of May 2024, the Long Range RWD, Long Range AWD and the Performance models "
            "are currently being offered for sale.",
            "'October 2023' -> 'May 2024'; 'Standard' -> 'Long'",
        ),
        # a comma moved: punctuation alone is no change
        (
            "It ranks 74 in the world ranking.",
            "It ranks 82nd in the world, ranking.",
            "'74' -> '82nd'",
        ),
        (
            "He appeared in A (2016), B (2017), and C (2019).",
            "He appeared in A (2016) and C (2019).",
            "'(2016), B (2017)' -> '(2016)'",
        ),
        ("He appeared in films.", "He also appeared in films.", "(only added or removed words)"),
    ],
)
def test_changed_qa_prompt_shows_the_words_that_changed(old: str, new: str, shown: str) -> None:
    assert changed_spans(old, new) == shown


def test_tolerant_parsing(article: Article) -> None:
    task = _initial_task(article)
    i, j = task.offered[0], task.offered[1]
    body = json.dumps({"question": "Who?", "answer": "X", "evidence": [i]})
    fenced = f"Sure!\n```json\n{body}\n```"
    item = _answer(task, fenced)
    assert isinstance(item, QAItem) and item.evidence_sent_idx == [i]
    item = _answer(task, json.dumps({"Question": "Who?", "ANSWER": 2019, "evidence": f"{j}, {i}"}))
    assert isinstance(item, QAItem)
    assert item.answer == "2019" and item.evidence_sent_idx == sorted([i, j])
    item = _answer(task, json.dumps({"question": "Who?", "answer": "X", "evidence": f"[{j}]"}))
    assert isinstance(item, QAItem) and item.evidence_sent_idx == [j]
    item = _answer(task, json.dumps({"question": "Who?", "answer": "X", "evidence": j, "note": 1}))
    assert isinstance(item, QAItem) and item.evidence_sent_idx == [j]


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("The answer is Paris.", "no_json"),
        ('{"question": "Who?", "evidence": [0]}', "missing_field"),
        ('{"question": "Who?", "answer": null, "evidence": [0]}', "missing_field"),
        ('{"question": "Who?", "answer": ["A", "B"], "evidence": [0]}', "wrong_type"),
        ('{"question": "Who?", "answer": "A", "evidence": ["first"]}', "wrong_type"),
        ('{"question": "Who?", "answer": "A", "evidence": true}', "wrong_type"),
        ('{"question": "Who?", "answer": "A"}', "missing_field"),
    ],
)
def test_unusable_answers_are_rejects_with_raw_output(
    article: Article, output: str, reason: str
) -> None:
    task = _initial_task(article)
    rejected = _answer(task, output)
    assert isinstance(rejected, Reject)
    assert rejected.reason == reason
    assert rejected.raw_output == output
    assert rejected.kind == "qa" and rejected.purpose == "qa_initial"
    assert rejected.page_id == article.page_id and rejected.prompt_hash == task.request.prompt_hash


def test_failed_request_is_an_llm_error_reject(article: Article) -> None:
    task = _initial_task(article)

    def boom(_: object) -> str:
        raise TimeoutError("server went away")

    rejected = parse_qa(task, ScriptedBackend(boom).complete_many([task.request])[0], GEN)
    assert isinstance(rejected, Reject) and rejected.reason == "llm_error"
    assert "server went away" in rejected.detail


def test_contradiction_checker_one_batch_and_tolerant_verdicts() -> None:
    answers = iter(
        [
            '{"contradicts": true, "reason": "the year moved"}',
            '{"contradicts": "no", "reason": "reworded"}',
            "They clearly contradict each other.",
            '{"contradicts": "maybe"}',
            '{"verdict": true}',
        ]
    )
    backend = ScriptedBackend(lambda _: next(answers))
    checker = LLMContradictionChecker(backend)
    assert checker.model_id == f"scripted:scripted:{prompt_hash('contradiction')}"
    pairs = [("Founded in 1990.", "Founded in 1991.")] + [("a", "b")] * 4
    assert checker.check(pairs) == [True, False, None, None, None]
    assert checker.calls == 1 and backend.calls == 5
    assert all(r.purpose == "contradiction" for r in backend.requests)
    assert "OLDER: Founded in 1990." in user_text(backend.requests[0])
    assert checker.check([]) == []
    assert read_verdict(LLMResponse(text="", model="m", error="boom")) is None
