"""Quadruples: timestamp normalization, request chunks, tolerant parsing, types from labels,
the checks of a quadruple."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.items import FieldError
from pipeline.generate.quadruples import (
    Quadruple,
    normalize_timestamp,
    parse_quadruples,
    quadruple_task,
    update_sentence_chunks,
)
from pipeline.generate.selection import Article
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.generate.validate import Verdict
from pipeline.generate.validator import ItemValidator
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.syntax import RelationParser
from pipeline.text_checks import is_iso_timestamp
from tests.generate.conftest import NEW, OLD, assert_rejected_for
from tests.scripted_llm import good_answer, user_text
from tests.test_text_checks import EVIDENCE

CFG = GenerationConfig()
GEN = "scripted:scripted"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-02-13", "2024-02-13"),
        ("2024-2-3", "2024-02-03"),
        ("2024/02/13", "2024-02-13"),
        ("2024-02", "2024-02"),
        ("2024", "2024"),
        (2024, "2024"),
        (2024.0, "2024"),
        ("13 February 2024", "2024-02-13"),
        ("13th Feb. 2024", "2024-02-13"),
        ("February 13, 2024", "2024-02-13"),
        ("Sept 1 2023", "2023-09-01"),
        ("March 2024", "2024-03"),
        ("march, 2024", "2024-03"),
        ("2024-02-13T10:00:00Z", "2024-02-13"),
        ("2024-02-13 10:00", "2024-02-13"),
        (None, None),
        ("", None),
        ("null", None),
        ("Unknown", None),
        ("N/A", None),
        ("early 2024", "early 2024"),  # kept as written: validation rejects it
        ("2024-02-30", "2024-02-30"),
        ("Smarch 2024", "Smarch 2024"),
    ],
)
def test_normalize_timestamp(raw: object, expected: str | None) -> None:
    assert normalize_timestamp(raw) == expected
    if expected in ("early 2024", "2024-02-30", "Smarch 2024"):
        assert not is_iso_timestamp(expected)
    elif expected is not None:
        assert is_iso_timestamp(expected)


@pytest.mark.parametrize("raw", [True, ["2024"], {"year": 2024}])
def test_non_scalar_timestamp_is_wrong_type(raw: object) -> None:
    with pytest.raises(FieldError) as err:
        normalize_timestamp(raw)
    assert err.value.reason == "wrong_type"


def _article(labels: list[str], paras: list[int]) -> Article:
    n = len(labels)
    return Article(
        page_id=3,
        title="Acme Corp",
        snapshot=NEW,
        texts=[f"In {2000 + i} Acme Corp hired Person{i}." for i in range(n)],
        para_of=paras,
        section_of=[""] * n,
        labels=dict(enumerate(labels)),
        initial=False,
    )


def test_update_chunks_hold_new_and_changed_sentences_per_paragraph() -> None:
    art = _article(
        ["new"] * 8 + ["unchanged", "changed", "unlabeled", "new"] + ["changed"],
        [0] * 8 + [1, 1, 1, 1] + [2],
    )
    assert update_sentence_chunks(art, 6) == [(0, 1, 2, 3, 4, 5), (6, 7), (9, 11), (12,)]


def test_parse_keeps_good_records_and_rejects_bad_ones_alone() -> None:
    art = _article(["new", "changed", "unchanged"], [0, 0, 0])
    task = quadruple_task(art, (0, 1), CFG)
    assert "[0] In 2000 Acme Corp hired Person0." in user_text(task.request)
    instructions = task.request.messages[-1]["content"]
    assert f"At most {CFG.quadruples_per_sentence} records" in instructions
    records = [
        {
            "subject": "Acme Corp",
            "relation": "hired",
            "object": "Person0",
            "timestamp": "2000",
            "sentence": 0,
        },
        {"Subject": "Acme Corp", "Relation": "hired", "Object": "Person1", "sentence": "1"},
        {"subject": "Acme Corp", "object": "Person1", "timestamp": None, "sentence": 1},
        "Acme hired people",
        {
            "subject": "Acme Corp",
            "relation": "hired",
            "object": "X",
            "timestamp": [1],
            "sentence": 1,
        },
    ]
    payload = "Facts:\n" + json.dumps({"quadruples": records})
    response = ScriptedBackend(lambda _: payload).complete_many([task.request])[0]
    quads, rejects = parse_quadruples(task, response, GEN)
    assert [(q.object, q.timestamp, q.type) for q in quads] == [
        ("Person0", "2000", "new"),
        ("Person1", None, "changed"),  # omitted timestamp = null; type from the label
    ]
    assert all(q.observed_at == NEW == q.snapshot for q in quads)
    assert quads[1].evidence_sent_idx == [1] and quads[1].evidence_text == art.texts[1]
    assert [r.reason for r in rejects] == ["missing_field", "wrong_type", "wrong_type"]
    assert all(r.raw_output == payload and r.kind == "quadruple" for r in rejects)
    assert quads[0].item_id != quads[1].item_id


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("no facts here", "no_json"),
        ('{"facts": []}', "missing_field"),
        ('{"quadruples": {"subject": "A"}}', "wrong_type"),
    ],
)
def test_unusable_quadruple_answers(payload: str, reason: str) -> None:
    art = _article(["new"], [0])
    task = quadruple_task(art, (0,), CFG)
    response = ScriptedBackend(lambda _: payload).complete_many([task.request])[0]
    quads, rejects = parse_quadruples(task, response, GEN)
    assert quads == [] and [r.reason for r in rejects] == [reason]


def test_empty_list_is_no_fact_and_no_reject() -> None:
    art = _article(["new"], [0])
    task = quadruple_task(art, (0,), CFG)
    response = ScriptedBackend(lambda _: '{"quadruples": []}').complete_many([task.request])[0]
    assert parse_quadruples(task, response, GEN) == ([], [])


@pytest.mark.slow
def test_real_dates_are_normalized(gen_source_workdir: Path) -> None:
    _, updated, _ = attach_labels(
        gen_source_workdir, OLD, NEW, load_articles(gen_source_workdir, NEW)
    )
    stamps = []
    for art in updated:
        for chunk in update_sentence_chunks(art, 6):
            task = quadruple_task(art, chunk, CFG)
            response = ScriptedBackend(good_answer).complete_many([task.request])[0]
            quads, rejects = parse_quadruples(task, response, GEN)
            assert rejects == []
            assert {q.type for q in quads} <= {"new", "changed"}
            stamps += [q.timestamp for q in quads if q.timestamp]
    assert stamps and all(is_iso_timestamp(s) for s in stamps)
    assert any(len(s) == 10 for s in stamps)  # "April 22, 1985"-style dates became YYYY-MM-DD


# ---- the checks of a quadruple (ItemValidator.score_quadruple) ----------------------------------


# Real article text (Meta Platforms, 2024) for the quadruple checks.
META = "Meta Platforms"
META_REVENUE = "In 2022, the company reported revenue of US$116.6 billion."


def quad(**over: object) -> Quadruple:
    base: dict[str, object] = {
        "page_id": 1,
        "title": "Andrej Karpathy",
        "snapshot": "2024-06-01",
        "subject": "Andrej Karpathy",
        "relation": "left",
        "object": "OpenAI",
        "timestamp": "2024-02-13",
        "evidence_sent_idx": [13],
        "evidence_text": EVIDENCE,
        "type": "new",
        "prompt_hash": "h",
        "generator": "g",
    }
    return Quadruple(**(base | over))  # type: ignore[arg-type]


def meta_quad(subject: str, obj: str = "US$116.6 billion", **over: object) -> Quadruple:
    base: dict[str, object] = {
        "title": META,
        "subject": subject,
        "relation": "reported revenue of",
        "object": obj,
        "timestamp": "2022",
        "evidence_text": META_REVENUE,
    }
    return quad(**(base | over))


V = ItemValidator()
GRAMMAR = ItemValidator(grammar=RelationParser())
QUESTIONS = ItemValidator(question_grammar=True)


CASES = [
    (lambda: V.score_quadruple(quad(relation=" "), n_sentences=20), "empty_field"),
    (lambda: V.score_quadruple(quad(timestamp="Feb 2024"), n_sentences=20), "bad_timestamp"),
    (
        lambda: V.score_quadruple(quad(timestamp="2019-05"), n_sentences=20),
        "timestamp_not_in_evidence",
    ),
    (
        lambda: V.score_quadruple(quad(subject="Tesla", object="Autopilot"), n_sentences=20),
        "quadruple_not_grounded",
    ),
    (
        lambda: V.score_quadruple(quad(evidence_sent_idx=[-1]), n_sentences=20),
        "evidence_out_of_range",
    ),
    (
        lambda: V.score_quadruple(
            quad(relation="confirmed through a spokesperson a year later that he had left"),
            n_sentences=20,
        ),
        "relation_too_long",
    ),
    (
        lambda: V.score_quadruple(quad(subject="OpenAI", object="the OpenAI"), n_sentences=20),
        "subject_equals_object",
    ),
    (lambda: V.score_quadruple(quad(object="openai.com"), n_sentences=20), "contains_url"),
    (
        lambda: V.score_quadruple(
            quad(subject="He", evidence_text="He left OpenAI in 2024.", timestamp="2024"),
            n_sentences=20,
        ),
        "vague_entity",
    ),
    (lambda: V.score_quadruple(quad(object="February 13, 2024"), n_sentences=20), "object_is_date"),
    (
        lambda: V.score_quadruple(quad(object="OpenAI (US"), n_sentences=20),
        "relation_not_stated",
    ),
    # the question grammar (spaCy)
    (
        lambda: QUESTIONS.score_quadruple(
            quad(subject="the spokesperson", relation="confirmed", object="Karpathy"),
            n_sentences=20,
        ),
        "generic_subject",
    ),
    # the spokesperson confirmed, not Karpathy
    (
        lambda: GRAMMAR.score_quadruple(quad(relation="confirmed"), n_sentences=20),
        "grammar_mismatch",
    ),
    (
        lambda: V.score_quadruple(
            quad(
                object="an OpenAI spokesperson confirmed that Karpathy had left OpenAI",
                relation="left",
            ),
            n_sentences=20,
        ),
        "object_too_long",
    ),
]


@pytest.mark.parametrize(("score", "reason"), CASES)
def test_each_failure_has_its_reason(score, reason: str) -> None:  # noqa: ANN001
    assert_rejected_for(score(), reason)


@pytest.mark.parametrize(
    "subject", ["Meta Platforms", "Meta", "Meta Platforms, Inc.", "META PLATFORMS"]
)
def test_quadruple_subject_may_be_the_title(subject: str) -> None:
    assert V.score_quadruple(meta_quad(subject), n_sentences=20).keep


def test_quadruple_title_disambiguator_is_ignored() -> None:
    item = meta_quad("Mercury", title="Mercury (planet)")
    assert V.score_quadruple(item, n_sentences=20).keep


@pytest.mark.parametrize(
    ("subject", "obj", "missing"),
    [
        ("Alphabet", "US$116.6 billion", "subject 'Alphabet'"),
        ("Meta", "US$117 billion", "object 'US$117 billion'"),
        ("Meta", "2022 revenue", "object '2022 revenue'"),
        ("Platforms Meta", "US$116.6 billion", "subject"),  # a title word salad is not the title
    ],
)
def test_quadruple_needs_both_subject_and_object(subject: str, obj: str, missing: str) -> None:
    verdict = V.score_quadruple(meta_quad(subject, obj), n_sentences=20)
    assert verdict.reason == "quadruple_not_grounded"
    assert missing in verdict.detail


def test_quadruple_object_may_be_a_list() -> None:
    item = quad(relation="had", object="1,200 students and two co-authors", timestamp=None)
    assert V.score_quadruple(item, n_sentences=20).keep


def test_quadruple_relation_and_subject_object_limits() -> None:
    eight = quad(relation="confirmed through a spokesperson that he had left")
    assert len(eight.relation.split()) == 8
    assert V.score_quadruple(eight, n_sentences=20).keep
    nine = quad(relation="confirmed through a spokesperson that he had finally left")
    assert V.score_quadruple(nine, n_sentences=20).reason == "relation_too_long"
    assert ItemValidator(relation_max_words=9).score_quadruple(nine, n_sentences=20).keep
    same = meta_quad("Meta", "META", evidence_text="Meta is Meta.", timestamp=None)
    assert V.score_quadruple(same, n_sentences=20).reason == "subject_equals_object"


@pytest.mark.parametrize("subject", ["He", "it", "The company", "the team", "They"])
def test_a_pronoun_instead_of_a_name_is_vague(subject: str) -> None:
    verdict = ItemValidator().score_quadruple(
        quad(subject=subject, evidence_text=f"{subject} left OpenAI on February 13, 2024."),
        n_sentences=20,
    )
    assert verdict.reason == "vague_entity"


def test_a_named_subject_is_not_vague() -> None:
    assert ItemValidator().score_quadruple(quad(), n_sentences=20).keep


@pytest.mark.parametrize("obj", ["2024", "February 2024", "13 February 2024", "2024-02-13"])
def test_a_date_is_not_an_object(obj: str) -> None:
    assert V.score_quadruple(quad(object=obj), n_sentences=20).reason == "object_is_date"


@pytest.mark.parametrize("obj", ["shortly after winning the title", "since the 2007 amendments"])
def test_a_time_phrase_is_not_an_object(obj: str) -> None:
    assert V.score_quadruple(quad(object=obj), n_sentences=20).reason == "object_is_date"


# Real sentences and the wrong facts a 1.5B model drew from them.
def _undated_fact(title: str, subject: str, relation: str, obj: str, evidence: str) -> Verdict:
    """The verdict on an undated quadruple of article ``title`` from ``evidence``."""
    q = quad(
        title=title,
        subject=subject,
        relation=relation,
        object=obj,
        timestamp=None,
        evidence_text=evidence,
    )
    return V.score_quadruple(q, n_sentences=20)


FOIA = "It also had not updated its policies since the 2007 FOIA amendments."
FANGIO = (
    "After winning their first race at the 1954 French Grand Prix, driver Juan Manuel Fangio "
    "won another three Grands Prix to win the 1954 Drivers' Championship."
)
ENGINES = (
    "For the 2024 season, Mercedes supplies engines to Aston Martin F1, McLaren, and Williams, "
    "in addition to their own team."
)
DHS = "United States Department of Homeland Security"
F1 = "Mercedes-Benz in Formula One"


@pytest.mark.parametrize(
    ("title", "subject", "relation", "obj", "evidence", "why"),
    [
        (DHS, DHS, "updated", "policies", FOIA, "the sentence says 'had not updated'"),
        (F1, "Mercedes-Benz", "won", "three Grands Prix", FANGIO, "'Fangio' does it"),
        (DHS, DHS, "received the most (FO", "requests", FOIA, "is cut off"),
        (F1, "Mercedes-Benz", "supplies engines to Aston, McLaren", "Williams", ENGINES, "list"),
        (
            F1,
            "Mercedes-Benz",
            "supplies engines to McLaren",
            "McLaren",
            ENGINES,
            "holds the object",
        ),
    ],
)
def test_a_relation_the_sentence_does_not_state_is_rejected(
    title: str, subject: str, relation: str, obj: str, evidence: str, why: str
) -> None:
    verdict = _undated_fact(title, subject, relation, obj, evidence)
    assert verdict.reason == "relation_not_stated"
    assert why in verdict.detail


INDICTED = (
    "On June 8, 2023, a grand jury indicted Trump on seven federal criminal charges related to "
    "his handling of classified documents."
)
PROSECUTIONS = (
    "He spent five years as chief of PIN, where he prosecuted a variety of corruption cases, "
    "including those against Virginia governor Bob McDonnell, U.S. representative Rick Renzi, "
    "Jeffrey Sterling, a Central Intelligence Agency agent who shared national secrets."
)
SMITH = "Jack Smith (lawyer)"


def _smith_fact(subject: str, relation: str, obj: str, evidence: str) -> Verdict:
    return _undated_fact(SMITH, subject, relation, obj, evidence)


@pytest.mark.parametrize(
    ("relation", "obj", "evidence", "why"),
    [
        ("was indicted", "Trump", INDICTED, "roles are reversed"),
        ("including", "Bob McDonnell", PROSECUTIONS, "only a linking word"),
        (
            "U. S. representative Rick Renzi",
            "Jeffrey Sterling",
            PROSECUTIONS,
            "holds a name (Rick)",
        ),
        (
            "a Central Intelligence Agency agent who shared",
            "national secrets",
            PROSECUTIONS,
            "a name",
        ),
    ],
)
def test_relations_that_are_no_verb_phrase_or_reverse_the_roles_are_rejected(
    relation: str, obj: str, evidence: str, why: str
) -> None:
    verdict = _smith_fact("Jack Smith", relation, obj, evidence)
    assert verdict.reason == "relation_not_stated"
    assert why in verdict.detail


@pytest.mark.parametrize(
    ("subject", "relation", "obj", "evidence"),
    [
        ("Trump", "was indicted on", "seven federal criminal charges", INDICTED),
        ("Jack Smith", "was chief of", "PIN", PROSECUTIONS),  # acronyms are not names here
        ("Jack Smith", "prosecuted", "Bob McDonnell", PROSECUTIONS),
        (
            "Karpathy",
            "was appointed CEO of",
            "Eureka Labs",
            "Karpathy was appointed CEO of Eureka Labs.",
        ),
        (
            "Sergio Pérez",
            "was replaced by",
            "Sebastian Vettel",
            "Sergio Pérez was replaced by Sebastian Vettel.",
        ),
    ],
)
def test_verb_phrases_with_acronyms_and_passives_that_hold_pass(
    subject: str, relation: str, obj: str, evidence: str
) -> None:
    verdict = _smith_fact(subject, relation, obj, evidence)
    assert "relation_not_stated" not in {c.name for c in verdict.failures}


def test_the_title_s_own_name_doing_the_verb_is_the_subject() -> None:
    assert _undated_fact(F1, "Mercedes-Benz", "supplies engines to", "McLaren", ENGINES).keep


@pytest.mark.parametrize("obj", ["OpenAI", "1,200 students", "the 2024 season", "Windows 2000"])
def test_names_and_amounts_are_objects(obj: str) -> None:
    assert "object_is_date" not in {
        c.name for c in V.score_quadruple(quad(object=obj), n_sentences=20).failures
    }


@pytest.mark.parametrize(
    ("timestamp", "evidence", "kept"),
    [
        ("2024-02-13", EVIDENCE, True),  # "February 13, 2024"
        ("2024-02", EVIDENCE, True),
        ("2024", EVIDENCE, True),
        ("2024-01-01", "Karpathy left OpenAI in 2024.", False),  # padded precision
        ("2024-02", "Karpathy left OpenAI in 2024.", False),
        ("2024-02-14", EVIDENCE, False),
        ("2013-06", "In June 2013, he joined.", True),
    ],
)
def test_every_part_of_a_timestamp_is_in_the_evidence(
    timestamp: str, evidence: str, kept: bool
) -> None:
    verdict = V.score_quadruple(quad(timestamp=timestamp, evidence_text=evidence), n_sentences=20)
    assert ("timestamp_not_in_evidence" not in {c.name for c in verdict.failures}) is kept


@pytest.mark.parametrize(
    ("evidence", "kept"),
    [
        ("He finished 8th in the Drivers' Championship in 2024.", True),
        ("Russell finished 8th in the Drivers' Championship in 2024.", False),
    ],
)
def test_the_title_stands_for_a_pronoun_only(evidence: str, kept: bool) -> None:
    item = quad(
        title="Mercedes-Benz in Formula One",
        subject="Mercedes-Benz",
        relation="finished",
        object="8th in the Drivers' Championship",
        timestamp="2024",
        evidence_text=evidence,
    )
    verdict = V.score_quadruple(item, n_sentences=20)
    assert ("quadruple_not_grounded" not in {c.name for c in verdict.failures}) is kept


@pytest.mark.parametrize(
    ("title", "subject", "sentence"),
    [
        # a longer form of the title's name, for "He"
        ("Pedro Pascal", "José Pedro Balmaceda Pascal", "In 2022, he sued the Trump Organization."),
        # the sentence calls the entity by the last word of its name
        ("Letitia James", "Letitia James", "In 2022, James sued the Trump Organization."),
        ("Tesla Model Y", "Tesla Model Y", "In 2023, the Model Y outsold the Trump Organization."),
    ],
)
def test_quadruple_subject_may_be_the_title_by_another_form(
    title: str, subject: str, sentence: str
) -> None:
    verdict = _undated_fact(title, subject, "sued", "the Trump Organization", sentence)
    assert "quadruple_not_grounded" not in {c.name for c in verdict.failures}


def test_a_lowercase_title_word_does_not_stand_for_the_title() -> None:
    verdict = _undated_fact(
        "Dark energy",
        "Dark energy",
        "drives",
        "the expansion",
        "Vacuum energy drives the expansion.",
    )
    assert verdict.reason == "quadruple_not_grounded"


def test_quadruple_objects_that_say_nothing_of_their_own() -> None:
    nra = (
        "In August 2020, James filed a civil lawsuit against the National Rifle Association, "
        "calling for its dissolution."
    )
    owner_elsewhere = _undated_fact(
        "Letitia James", "Letitia James", "called for", "its dissolution", nra
    )
    assert owner_elsewhere.reason == "vague_entity"
    candidates = (
        "The main candidates are a cosmological constant and scalar fields such as quintessence."
    )
    inside = _undated_fact("Dark energy", "the main candidates", "are", "candidates", candidates)
    assert inside.reason == "subject_equals_object"
    updates = (
        "It will continue to receive major software updates for a minimum of five years to at "
        "least 2028."
    )
    year = _undated_fact("IPhone 15", "iPhone 15", "will receive updates", "at least 2028", updates)
    assert year.reason == "object_is_date"
