"""The checks every item kind shares, on items of each kind: every reject code exercised,
URLs and odd scripts, verdicts that keep every check, duplicates. Each kind's own checks are
tested with the kind (test_qa.py, test_dialogue.py, test_quadruples.py)."""

from __future__ import annotations

from pipeline.generate.qa import question_key
from pipeline.generate.quadruples import quadruple_key
from pipeline.generate.validate import REASONS, split_duplicates
from pipeline.generate.validator import ItemValidator
from tests.generate.test_dialogue import CASES as DIALOGUE_CASES
from tests.generate.test_dialogue import TURN_SENTENCES, dialogue
from tests.generate.test_qa import CASES as QA_CASES
from tests.generate.test_qa import IBM_OLD, INJECTED, changed, qa
from tests.generate.test_quadruples import CASES as QUADRUPLE_CASES
from tests.generate.test_quadruples import quad
from tests.test_text_checks import EVIDENCE

CASES = QA_CASES + DIALOGUE_CASES + QUADRUPLE_CASES
V = ItemValidator()


def test_every_content_reason_is_exercised() -> None:
    parse_reasons = {
        "llm_error",
        "no_json",
        "missing_field",
        "wrong_type",
        "duplicate",
        "answer_check_failed",
    }
    assert {reason for _, reason in CASES} == set(REASONS) - parse_reasons


def test_scores_are_kept_for_every_check() -> None:
    verdict = V.score_qa(
        qa(answer="Tesla Motors of Palo Alto in the state of California, USA, North America"),
        n_sentences=20,
    )
    failed = {c.name for c in verdict.failures}
    assert failed == {"answer_too_long", "answer_not_grounded"}
    assert len(verdict.checks) > len(failed)  # passed checks are recorded too


def test_duplicates_within_an_article() -> None:
    items = [
        qa(),
        qa(question="When did an OpenAI spokesperson confirm Karpathy's departure"),
        qa(page_id=2),
        qa(question="Who left OpenAI?", answer="Karpathy"),
    ]
    kept, dups = split_duplicates(items, question_key, lambda q: q.page_id)
    assert kept == [items[0], items[2], items[3]]
    assert dups == [items[1]]
    quads = [quad(), quad(object="the OpenAI"), quad(timestamp=None)]
    kept_q, dups_q = split_duplicates(quads, quadruple_key, lambda q: q.page_id)
    assert kept_q == [quads[0], quads[2]] and dups_q == [quads[1]]


def test_an_injected_link_yields_no_item_of_any_kind() -> None:
    """An article sentence carrying a link makes no kept item, even when the item's own texts
    are clean; an item that copies the link is rejected wherever the link sits."""
    clean_sentence = TURN_SENTENCES[10]
    verdicts = [
        V.score_qa(
            qa(evidence_text=INJECTED, question="Who offers free prizes?", answer="evil"),
            n_sentences=20,
        ),
        V.score_qa(
            qa(
                question="Where can readers find the full story?",
                answer="http://evil.example",
                evidence_text=f"{EVIDENCE} {INJECTED}",
            ),
            n_sentences=20,
        ),
        V.score_qa(changed(old_evidence_text=f"{IBM_OLD} {INJECTED}"), n_sentences=20),
        V.score_dialogue(dialogue(evidence_text=INJECTED), n_sentences=20),
        V.score_dialogue(
            dialogue(user="Is there more at evil.example/story?", evidence_text=clean_sentence),
            n_sentences=20,
        ),
        V.score_quadruple(quad(evidence_text=f"{EVIDENCE} {INJECTED}"), n_sentences=20),
        V.score_quadruple(quad(relation="announced at www.evil.example"), n_sentences=20),
        V.score_quadruple(quad(subject="karpathy@evil.example"), n_sentences=20),
    ]
    for verdict in verdicts:
        assert verdict.reason == "contains_url", verdict.detail
        assert "evil.example" in verdict.detail


def test_company_names_with_a_domain_are_kept() -> None:
    item = qa(
        title="Amazon (company)",
        question="Who founded Amazon.com in 1994?",
        answer="Jeff Bezos",
        evidence_text=(
            "Amazon.com, Inc. was founded by Jeff Bezos in Bellevue, Washington, in July 1994."
        ),
    )
    assert V.score_qa(item, n_sentences=20).keep


def test_accented_latin_letters_are_not_garbled() -> None:
    item = qa(
        question="Where did Karpathy study, at Université de Montréal?", answer="1,200 students"
    )
    assert "garbled_text" not in {c.name for c in V.score_qa(item, n_sentences=20).failures}
