"""QA requests from real articles and tolerant parsing of the answers; the contradiction check."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.answer_spans import changed_values
from pipeline.generate.contradiction import LLMContradictionChecker, read_verdict
from pipeline.generate.items import QAItem, Reject
from pipeline.generate.prompts import prompt_hash
from pipeline.generate.qa import (
    RETRY_TEMPERATURE,
    QATask,
    changed_qa_task,
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
    assert task.request.prompt_hash == prompt_hash("qa_initial")
    # the answer is one of the spans code picked, offered per sentence and enforced by schema
    offered = [s.text for s in task.spans]
    assert offered and {s.sent_idx for s in task.spans} <= set(task.offered)
    assert task.request.json_schema is not None
    answer = task.request.json_schema["properties"]["answer"]
    assert answer["enum"] == list(dict.fromkeys(offered))
    for span in task.spans:
        assert span.text in article.texts[span.sent_idx]
        assert f'"{span.text}"' in text.partition("Candidate answers:")[2]


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

    # the answer is the offered span as written, its sentence the evidence
    span = task.spans[-1]
    item = _answer(task, json.dumps({"answer": span.text.upper(), "question": "Q?"}))
    assert isinstance(item, QAItem)
    assert (item.answer, item.evidence_sent_idx) == (span.text, [span.sent_idx])


def test_a_changed_question_has_the_replaced_value_and_its_replacement_as_answers(
    updated: list[Article],
) -> None:
    art, pair, values = next(
        (a, p, v)
        for a in updated
        for p in changed_pairs(a)
        if (v := changed_values(p.old_text, p.new_text)) is not None
    )
    ctask = changed_qa_task(art, pair, CFG, OLD)
    assert ctask is not None and ctask.values == values
    previous, current = values
    assert previous in pair.old_text and current in pair.new_text
    text = user_text(ctask.request)
    assert f"EARLIER: {pair.old_text}" in text and f"CURRENT: {pair.new_text}" in text
    assert f"PREVIOUS: {previous}\nANSWER: {current}" in text
    assert set(ctask.request.json_schema["properties"]) == {"question"}
    changed = _answer(ctask, json.dumps({"question": "Q?"}))
    assert isinstance(changed, QAItem)
    assert (changed.type, changed.origin) == ("changed", "changed_sentence")
    assert (changed.previous_answer, changed.answer) == values
    assert changed.evidence_sent_idx == [pair.new_idx]
    assert changed.evidence_text == pair.new_text
    assert changed.old_evidence_sent_idx == [pair.old_idx]
    assert changed.old_evidence_text == pair.old_text
    assert changed.previous_snapshot == OLD


def test_nothing_to_ask_makes_no_request(article: Article) -> None:
    para = next(p for p in article.paragraphs() if len(p.sent_idx) >= 2)
    bare = replace(para, texts=("It was good.",) * len(para.texts))
    plain = replace(article, texts=["It was good."] * article.n_sentences)
    assert initial_qa_task(plain, bare, CFG) is None


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
    ("old", "new", "values"),
    [
        (
            "As of October 2023, the Standard Range RWD models are offered for sale.",
            "As of May 2024, the Long Range RWD models are offered for sale.",
            ("October 2023", "May 2024"),
        ),
        (
            "It had 80,000 employees in 2020.",
            "It had 83,300 employees in 2020.",
            ("80,000", "83,300"),
        ),
        ("He appeared in films.", "He also appeared in films.", None),  # an added word
        # a value still in the other sentence did not change
        ("She joined in 2012 and left in 2014.", "She joined in 2014.", None),
    ],
)
def test_changed_values(old: str, new: str, values: tuple[str, str] | None) -> None:
    assert changed_values(old, new) == values


def test_tolerant_parsing(article: Article) -> None:
    task = _initial_task(article)
    span = task.spans[0]
    body = json.dumps({"answer": span.text, "question": "Who?"})
    item = _answer(task, f"Sure!\n```json\n{body}\n```")
    assert isinstance(item, QAItem) and item.evidence_sent_idx == [span.sent_idx]
    item = _answer(task, json.dumps({"Question": "Who?", "ANSWER": span.text, "note": 1}))
    assert isinstance(item, QAItem) and item.answer == span.text
    # an answer outside the offered spans (a backend that ignored the schema): the offered
    # sentence that holds it is the evidence; validation judges the rest
    word = next(w for w in article.texts[task.offered[-1]].split() if len(w) > 4).strip(".,;:")
    item = _answer(task, json.dumps({"answer": word, "question": "Who?"}))
    assert isinstance(item, QAItem) and word in item.evidence_text


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("The answer is Paris.", "no_json"),
        ('{"question": "Who?"}', "missing_field"),
        ('{"question": "Who?", "answer": null}', "missing_field"),
        ('{"question": "Who?", "answer": ["A", "B"]}', "wrong_type"),
        ('{"answer": "A"}', "missing_field"),
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
