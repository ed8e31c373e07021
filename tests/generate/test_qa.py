"""QA requests from real articles and tolerant parsing of the answers; the contradiction check;
the checks of a QA item."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.answer_spans import changed_values
from pipeline.generate.contradiction import LLMContradictionChecker, read_verdict
from pipeline.generate.items import Reject
from pipeline.generate.prompts import prompt_hash
from pipeline.generate.qa import (
    RETRY_TEMPERATURE,
    QAItem,
    QATask,
    changed_qa_task,
    initial_qa_task,
    new_qa_task,
    parse_qa,
    retry_qa_task,
)
from pipeline.generate.selection import Article, changed_pairs, group_new_sentences
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.generate.validator import ItemValidator
from pipeline.models.llm.base import LLMResponse
from pipeline.models.llm.scripted import ScriptedBackend
from tests.generate.conftest import NEW, OLD, assert_rejected_for
from tests.scripted_llm import good_answer, user_text
from tests.test_text_checks import EVIDENCE

# The tests marked slow build and label a real workdir (spaCy, MiniLM); the checks' tests do not.

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_nothing_to_ask_makes_no_request(article: Article) -> None:
    para = next(p for p in article.paragraphs() if len(p.sent_idx) >= 2)
    bare = replace(para, texts=("It was good.",) * len(para.texts))
    plain = replace(article, texts=["It was good."] * article.n_sentences)
    assert initial_qa_task(plain, bare, CFG) is None


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_failed_request_is_an_llm_error_reject(article: Article) -> None:
    task = _initial_task(article)

    def boom(_: object) -> str:
        raise TimeoutError("server went away")

    rejected = parse_qa(task, ScriptedBackend(boom).complete_many([task.request])[0], GEN)
    assert isinstance(rejected, Reject) and rejected.reason == "llm_error"
    assert "server went away" in rejected.detail


@pytest.mark.slow
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


# ---- the checks of a QA item (ItemValidator.score_qa) -------------------------------------------


# Real article text (Meta Platforms, 2024) for the topic and give-away checks.
META = "Meta Platforms"
META_HQ = (
    "Meta Platforms, Inc., doing business as Meta, is an American multinational technology "
    "conglomerate headquartered in Menlo Park, California."
)
META_RENAME = (
    "In October 2021, the parent company of Facebook changed its name from Facebook, Inc., to "
    "Meta Platforms, Inc."
)
INJECTED = "For the full story and free prizes, visit http://evil.example today."
IBM_OLD = "He has been CEO of IBM since April 2020 and chairman since January 2021."
IBM_NEW = "He has been CEO of IBM since April 2020 and chairman since January 2022."


def qa(**over: object) -> QAItem:
    base: dict[str, object] = {
        "page_id": 1,
        "title": "Andrej Karpathy",
        "snapshot": "2024-06-01",
        "type": "new",
        "origin": "new_sentences",
        "question": "When did an OpenAI spokesperson confirm Karpathy's departure?",
        "answer": "February 13, 2024",
        "evidence_sent_idx": [13],
        "evidence_text": EVIDENCE,
        "prompt_hash": "h",
        "generator": "scripted:scripted",
        "raw_output": "{}",
    }
    return QAItem(**(base | over))  # type: ignore[arg-type]


def changed(**over: object) -> QAItem:
    return qa(
        **{
            "type": "changed",
            "origin": "changed_sentence",
            "question": "Since when has Arvind Krishna been chairman of IBM?",
            "previous_answer": "January 2021",
            "answer": "January 2022",
            "evidence_text": IBM_NEW,
            "old_evidence_sent_idx": [1],
            "old_evidence_text": IBM_OLD,
            "evidence_sent_idx": [1],
        }
        | over
    )


def meta_qa(question: str, answer: str, evidence: str = META_HQ, **over: object) -> QAItem:
    return qa(title=META, question=question, answer=answer, evidence_text=evidence, **over)


V = ItemValidator()
QUESTIONS = ItemValidator(question_grammar=True)
SU_JOBS = "Su joined AMD in 2012 and was appointed CEO in October 2014."


CASES = [
    (lambda: V.score_qa(qa(question=""), n_sentences=20), "empty_field"),
    (lambda: V.score_qa(qa(evidence_sent_idx=[]), n_sentences=20), "empty_field"),
    (lambda: V.score_qa(qa(evidence_sent_idx=[20]), n_sentences=20), "evidence_out_of_range"),
    (lambda: V.score_qa(qa(), n_sentences=20, allowed=[1, 2]), "evidence_outside_input"),
    (
        lambda: V.score_qa(qa(question="According to the text, when?"), n_sentences=20),
        "question_leans_on_text",
    ),
    (
        lambda: V.score_qa(
            qa(question="When did a spokesperson confirm his departure from OpenAI?"),
            n_sentences=20,
        ),
        "question_not_standalone",
    ),
    (
        lambda: V.score_qa(
            qa(
                answer="A year later an OpenAI spokesperson confirmed that Karpathy had left OpenAI"
            ),
            n_sentences=20,
        ),
        "answer_too_long",
    ),
    (lambda: V.score_qa(qa(answer="No"), n_sentences=20), "yes_no_answer"),
    (
        lambda: V.score_qa(
            qa(question="Did Karpathy leave OpenAI?", answer="OpenAI"), n_sentences=20
        ),
        "answer_in_question",
    ),
    (lambda: V.score_qa(qa(answer="Tesla"), n_sentences=20), "answer_not_grounded"),
    (
        lambda: V.score_qa(changed(previous_answer="March 2019"), n_sentences=20),
        "previous_answer_not_grounded",
    ),
    (
        lambda: V.score_qa(
            changed(previous_answer="April 2020", answer="april 2020."), n_sentences=20
        ),
        "answers_identical",
    ),
    (lambda: V.score_qa(changed(previous_answer=" "), n_sentences=20), "empty_field"),
    (
        lambda: V.score_qa(qa(answer="www.openai.com"), n_sentences=20),
        "contains_url",
    ),
    (
        lambda: V.score_qa(
            meta_qa("In which city is Meta headquartered?", "Menlo Park", f"{META_HQ} {INJECTED}"),
            n_sentences=20,
        ),
        "contains_url",
    ),
    (
        lambda: V.score_qa(meta_qa("What is the capital of France?", "Menlo Park"), n_sentences=20),
        "question_not_about_evidence",
    ),
    (
        lambda: V.score_qa(
            meta_qa("Is Meta headquartered in Menlo Park or in Paris?", "Menlo Park, California"),
            n_sentences=20,
        ),
        "answerable_from_question",
    ),
    (
        lambda: V.score_qa(
            qa(
                question="What is the name of the United States Department of Homeland Security?",
                answer="DHS",
                evidence_text=DHS,
                title="DHS",
            ),
            n_sentences=20,
        ),
        "answer_abbreviates_question",
    ),
    (
        lambda: V.score_qa(qa(question="When did Karpathy leave OpenAI肝?"), n_sentences=20),
        "garbled_text",
    ),
    # the question grammar (spaCy): premise, attachment, a name
    (  # stopped mid-phrase (make run, Jack Smith: "...; and whether")
        lambda: QUESTIONS.score_qa(
            qa(question="When did Karpathy join OpenAI as a founding member and whether"),
            n_sentences=20,
        ),
        "question_cut_off",
    ),
    (
        lambda: QUESTIONS.score_qa(
            qa(question="When did the spokesperson confirm the news?"), n_sentences=20
        ),
        "question_names_nothing",
    ),
    (
        lambda: QUESTIONS.score_qa(
            qa(question="When did an OpenAI spokesperson deny that Karpathy left?"), n_sentences=20
        ),
        "question_premise_unstated",
    ),
    (  # Smith brought the case: "against Smith" swaps the sides (make run, Jack Smith)
        lambda: QUESTIONS.score_qa(
            qa(
                title="Jack Smith (lawyer)",
                question="Which judge dismissed the documents case against Smith in July 2024?",
                answer="Aileen Cannon",
                evidence_text="The documents case was dismissed by judge Aileen Cannon in July "
                "2024, on the grounds that Smith was unlawfully appointed.",
            ),
            n_sentences=20,
        ),
        "question_side_unstated",
    ),
    (  # Altman was accused, not OpenAI (dev gold, Sam Altman)
        lambda: QUESTIONS.score_qa(
            qa(
                title="Sam Altman",
                question="In which month was OpenAI accused of lying about the provision?",
                answer="May 2024",
                evidence_text="In May 2024, after OpenAI's agreements were exposed, Altman was "
                "accused of lying about the provision.",
            ),
            n_sentences=20,
        ),
        "question_actor_swapped",
    ),
    (  # the figure is the 2023 season's (test gold, Miami Dolphins)
        lambda: QUESTIONS.score_qa(
            qa(
                title="Miami Dolphins",
                question="By how much do the Miami Dolphins lead the all-time series?",
                answer="62–55",
                evidence_text="As of the 2023 season, the Dolphins lead the all-time series 62–55.",
            ),
            n_sentences=20,
        ),
        "question_drops_date",
    ),
    (  # the sentence gives no year (dev gold, Pedro Pascal)
        lambda: QUESTIONS.score_qa(
            qa(
                title="Pedro Pascal",
                question="When did Pedro Pascal sign with Creative Artists Agency?",
                answer="November",
                evidence_text="In November, he signed with Creative Artists Agency.",
            ),
            n_sentences=20,
        ),
        "answer_lacks_year",
    ),
    (  # 19 is the losses of the 65-19 record (dev gold, Denver Nuggets)
        lambda: QUESTIONS.score_qa(
            qa(
                title="Denver Nuggets",
                question="What record did the Denver Nuggets finish the 1974–75 season with?",
                answer="19",
                evidence_text="The Denver Nuggets finished the 1974–75 season with a record "
                "of 65–19.",
            ),
            n_sentences=20,
        ),
        "answer_part_of_range",
    ),
    (  # 2012 is when she joined, not when she was appointed
        lambda: QUESTIONS.score_qa(
            qa(
                title="Lisa Su",
                question="When was Su appointed CEO of AMD?",
                answer="2012",
                evidence_text=SU_JOBS,
            ),
            n_sentences=20,
        ),  # fmt: skip
        "answer_not_attached",
    ),
    (
        lambda: V.score_qa(
            changed(
                question="Which engine customers does Mercedes supply?",
                previous_answer="McLaren",
                answer="Williams",
                old_evidence_text="Mercedes supplied engines to McLaren and Williams.",
                evidence_text="Mercedes supplies engines to Aston Martin and Williams.",
            ),
            n_sentences=20,
        ),
        "answer_did_not_change",
    ),
]


@pytest.mark.parametrize(("score", "reason"), CASES)
def test_each_failure_has_its_reason(score, reason: str) -> None:  # noqa: ANN001
    assert_rejected_for(score(), reason)


@pytest.mark.parametrize(
    ("question", "answer", "evidence"),
    [
        # the title carries the topic when the evidence says "the CEO" only
        (
            "Who is the chief executive of Meta Platforms?",
            "Mark Zuckerberg",
            "Mark Zuckerberg is the CEO.",
        ),
        ("In which city is Meta headquartered?", "Menlo Park", META_HQ),
        # "founded" ~ "founder" (shared prefix)
        ("Who founded Meta's social network?", "Zuckerberg", "Zuckerberg was its founder."),
        # "cars" ~ "car" (plural strip; "sales" is not "selling")
        (
            "Which of the world's cars led sales in 2023?",
            "Model Y",
            "The Model Y was the best-selling car in the world in 2023.",
        ),
        # "headquarters" ~ "headquartered", "conglomerate" is in the evidence only
        ("Where are the headquarters of the American conglomerate?", "Menlo Park", META_HQ),
        (
            "What was Facebook, Inc. renamed to in October 2021?",
            "Meta Platforms, Inc.",
            META_RENAME,
        ),
    ],
)
def test_questions_about_the_evidence_or_title_pass(
    question: str, answer: str, evidence: str
) -> None:
    verdict = V.score_qa(meta_qa(question, answer, evidence), n_sentences=20)
    assert verdict.keep, verdict.detail


@pytest.mark.parametrize(
    "question",
    [
        "What is the capital of France?",
        "Which river flows through Paris?",
        "What happened next?",  # no content word at all
    ],
)
def test_questions_about_something_else_are_rejected(question: str) -> None:
    verdict = V.score_qa(meta_qa(question, "Menlo Park"), n_sentences=20)
    assert verdict.reason == "question_not_about_evidence"
    assert "question_not_about_evidence" in verdict.detail


def test_changed_question_may_match_the_old_sentence() -> None:
    item = changed(question="Since when has Arvind Krishna chaired IBM's board?")
    assert V.score_qa(item, n_sentences=20).keep


@pytest.mark.parametrize(
    ("question", "answer", "evidence", "why"),
    [
        (
            "Which city in California, Menlo Park or Palo Alto, hosts Meta's headquarters?",
            "Menlo Park, California",
            META_HQ,
            "every word",
        ),
        (
            "Is Meta headquartered in Menlo Park or in Paris?",
            "Menlo Park, California",
            META_HQ,
            "as a choice",
        ),
        (
            "Did Meta move its headquarters to Paris, Dublin, or Menlo Park?",
            "Menlo Park, California",
            META_HQ,
            "as a choice",
        ),
        (
            "In which month of 2021, October or November, did Facebook take the name Meta?",
            "October 2021",
            META_RENAME,
            "every word",
        ),
    ],
)
def test_questions_that_give_the_answer_away_are_rejected(
    question: str, answer: str, evidence: str, why: str
) -> None:
    verdict = V.score_qa(meta_qa(question, answer, evidence), n_sentences=20)
    assert verdict.reason == "answerable_from_question"
    assert why in verdict.detail


@pytest.mark.parametrize(
    ("question", "answer", "evidence"),
    [
        # one shared token ("Inc") of a multi-word answer is fine
        (
            "What was Facebook, Inc. renamed to in October 2021?",
            "Meta Platforms, Inc.",
            META_RENAME,
        ),
        # an "or" whose alternatives are not the answer
        (
            "When did OpenAI or its spokesperson confirm that Karpathy had left?",
            "February 13, 2024",
            EVIDENCE,
        ),
        (
            "Which company did Facebook become, Meta or another?",
            "Meta Platforms, Inc.",
            META_RENAME,
        ),
        (
            "What did Facebook, Inc. or its parent company become in October 2021?",
            "Meta Platforms, Inc.",
            META_RENAME,
        ),
    ],
)
def test_questions_sharing_part_of_the_answer_pass(
    question: str, answer: str, evidence: str
) -> None:
    verdict = V.score_qa(meta_qa(question, answer, evidence), n_sentences=20)
    assert verdict.keep, verdict.detail


def test_previous_answer_offered_as_a_choice_is_rejected() -> None:
    item = changed(
        question="Was Arvind Krishna IBM's chairman since April or January?",
        previous_answer="January 2021",
    )
    verdict = V.score_qa(item, n_sentences=20)
    assert verdict.reason == "answerable_from_question"


def test_an_answer_mostly_spelled_out_by_its_question_is_rejected() -> None:
    item = qa(
        question="What does semaglutide do to blood sugar levels?",
        answer="decreases blood sugar levels",
        evidence_text="The drug decreases blood sugar levels.",
        title="Semaglutide",
    )
    verdict = V.score_qa(item, n_sentences=20)
    assert verdict.reason == "answerable_from_question" and "most words" in verdict.detail


# From the gold set's dev articles: the model offered the initials of a name the question
# spells out as its answer.
DHS = (
    "The United States Department of Homeland Security (DHS) is the U.S. federal executive "
    "department responsible for public security."
)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What is the name of the United States Department of Homeland Security?", "DHS"),
        ("What is the name of the United States Department of Homeland Security?", "U.S."),
        ("Which agency does the United States Department of Homeland Security run?", "the DHS"),
    ],
)
def test_an_answer_that_abbreviates_the_question_is_rejected(question: str, answer: str) -> None:
    item = qa(question=question, answer=answer, evidence_text=DHS, title="DHS")
    verdict = V.score_qa(item, n_sentences=20)
    assert verdict.reason == "answer_abbreviates_question", verdict.detail


def test_initials_the_question_does_not_spell_out_pass() -> None:
    item = qa(
        question="Which department is responsible for public security in the United States?",
        answer="DHS",
        evidence_text=DHS,
        title="DHS",
    )
    verdict = V.score_qa(item, n_sentences=20)
    assert verdict.reason != "answer_abbreviates_question", verdict.detail


BIOMARKER = (
    "For example, isolation of protoporphyrin IX from blood samples can be used as a diagnostic "
    "tool for atherosclerosis."
)
MODEL_Y = "The Model Y is Tesla's first vehicle to use a heat pump for interior cabin heating."


@pytest.mark.parametrize(
    ("title", "question", "answer", "evidence", "kept"),
    [
        # the evidence gives one example, the question makes it "the main" one
        ("Liquid biopsy", "What is the main biomarker used for detecting atherosclerosis?",
         "protoporphyrin IX", BIOMARKER, False),
        ("Tesla Model Y", "What is Tesla's first vehicle to use a heat pump for cabin heating?",
         "Model Y", MODEL_Y, True),
        # a title's capitalized "Last" ranks nothing
        ("Pedro Pascal", "Which award did Pascal receive for his role in The Last of Us?",
         "Screen Actors Guild Award", "For The Last of Us, he received a Screen Actors Guild "
         "Award.", True),
    ],
)  # fmt: skip
def test_a_question_ranks_its_answer_only_where_the_evidence_does(
    title: str, question: str, answer: str, evidence: str, kept: bool
) -> None:
    item = qa(title=title, question=question, answer=answer, evidence_text=evidence)
    verdict = V.score_qa(item, n_sentences=20)
    assert ("question_not_about_evidence" not in {c.name for c in verdict.failures}) is kept
