"""Item checks: every rejection reason of every kind of item, and dedup."""

from __future__ import annotations

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.items import Dialogue, DialogueTurn, QAItem, Quadruple
from pipeline.generate.validate import (
    REASONS,
    ItemValidator,
    Verdict,
    good_turns,
    quadruple_key,
    question_key,
    split_duplicates,
)
from pipeline.syntax import RelationParser
from tests.test_text_checks import EVIDENCE

# Real article text (Meta Platforms, 2024) for the topic / give-away / quadruple checks.
META = "Meta Platforms"
META_HQ = (
    "Meta Platforms, Inc., doing business as Meta, is an American multinational technology "
    "conglomerate headquartered in Menlo Park, California."
)
META_RENAME = (
    "In October 2021, the parent company of Facebook changed its name from Facebook, Inc., to "
    "Meta Platforms, Inc."
)
META_REVENUE = "In 2022, the company reported revenue of US$116.6 billion."
INJECTED = "For the full story and free prizes, visit http://evil.example today."
OLD = "He has been CEO of IBM since April 2020 and chairman since January 2021."
NEW = "He has been CEO of IBM since April 2020 and chairman since January 2022."


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
            "evidence_text": NEW,
            "old_evidence_sent_idx": [1],
            "old_evidence_text": OLD,
            "evidence_sent_idx": [1],
        }
        | over
    )


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


TURN_SENTENCES = {
    10: "In 2015, Karpathy joined OpenAI as a founding member.",
    11: "In 2017, he became the director of artificial intelligence at Tesla.",
}
# Turn k replies from sentence 10 + k % 2; the third turn brings another detail of sentence 10.
TURN_EXPERTS = [
    "Karpathy joined OpenAI in 2015 as one of its founding members.",
    "He became Tesla's director of artificial intelligence in 2017.",
    "He was among the founding members of OpenAI.",
    "Tesla hired him in 2017 to direct its artificial intelligence work.",
]


def dialogue(n: int = 3, **turn_over: object) -> Dialogue:
    turns = [
        DialogueTurn(
            turn_idx=k,
            user=f"Tell me about point {k}.",
            expert=TURN_EXPERTS[k % 4],
            evidence_sent_idx=[10 + k % 2],
            evidence_text=TURN_SENTENCES[10 + k % 2],
            type="new",
        )
        for k in range(n)
    ]
    for key, value in turn_over.items():
        setattr(turns[-1], key, value)
    return Dialogue(1, "Andrej Karpathy", "2024-06-01", 4, turns, "h", "g", "{}")


def meta_qa(question: str, answer: str, evidence: str = META_HQ, **over: object) -> QAItem:
    return qa(title=META, question=question, answer=answer, evidence_text=evidence, **over)


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
SU_JOBS = "Su joined AMD in 2012 and was appointed CEO in October 2014."


def test_good_items_pass_every_check() -> None:
    for verdict in (
        V.score_qa(qa(), n_sentences=20, allowed=[12, 13]),
        V.score_qa(changed(), n_sentences=20, allowed=[1]),
        V.score_dialogue(dialogue(), n_sentences=20, allowed=[10, 11]),
        V.score_dialogue(dialogue(4), n_sentences=20, allowed=[10, 11]),
        V.score_quadruple(quad(), n_sentences=20, allowed=[13]),
        V.score_quadruple(quad(timestamp=None), n_sentences=20),
    ):
        assert verdict.keep, verdict.detail
        assert verdict.reason is None and verdict.detail == ""


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
    (lambda: V.score_dialogue(dialogue(2), n_sentences=20), "bad_turn_count"),
    (lambda: V.score_dialogue(dialogue(5), n_sentences=20), "bad_turn_count"),
    (lambda: V.score_dialogue(dialogue(expert=""), n_sentences=20), "empty_field"),
    (
        lambda: V.score_dialogue(dialogue(evidence_sent_idx=[99]), n_sentences=20),
        "evidence_out_of_range",
    ),
    (
        lambda: V.score_dialogue(dialogue(evidence_sent_idx=[3]), n_sentences=20, allowed=[10, 11]),
        "evidence_outside_input",
    ),
    (lambda: V.score_dialogue(dialogue(type="unlabeled"), n_sentences=20), "evidence_unlabeled"),
    (
        lambda: V.score_dialogue(dialogue(user="As mentioned above, he left."), n_sentences=20),
        "turn_leans_on_text",
    ),
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
        lambda: V.score_dialogue(
            dialogue(expert="Karpathy joined OpenAI as a founding member in 2016."),
            n_sentences=20,
        ),
        "turn_not_grounded",
    ),
    (
        lambda: V.score_dialogue(
            dialogue(expert="See http://evil.example for the full story."), n_sentences=20
        ),
        "contains_url",
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
        lambda: V.score_qa(qa(question="When did Karpathy leave OpenAI肝?"), n_sentences=20),
        "garbled_text",
    ),
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
    (
        lambda: V.score_dialogue(dialogue(expert=TURN_EXPERTS[0]), n_sentences=20),
        "repeated_turn",
    ),
    # the question grammar (spaCy): premise, attachment, a name; each turn of a dialogue
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
        lambda: QUESTIONS.score_turns(
            dialogue(expert="In 2015, Karpathy became a founding member of OpenAI and")
        )[-1],
        "turn_cut_off",
    ),
    (
        lambda: QUESTIONS.score_turns(
            dialogue(expert="In 2015, Karpathy became a founding member of OpenAI, a rare honour.")
        )[-1],
        "turn_adds_claims",
    ),
    (
        lambda: QUESTIONS.score_turns(dialogue(user="When did he join OpenAI?"))[-1],
        "turn_not_answered",
    ),
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
    verdict = score()
    assert not verdict.keep
    assert verdict.reason == reason
    assert reason in verdict.detail
    assert reason in REASONS


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


def test_a_dialogue_is_cut_before_its_first_bad_turn() -> None:
    # the fourth reply says "work", which its sentence does not: three good turns remain
    four = dialogue(4)
    verdicts = QUESTIONS.score_turns(four)
    assert [v.keep for v in verdicts] == [True, True, True, False]
    assert good_turns(verdicts, 3) == 3 and good_turns(verdicts, 4) == 0
    n, verdict = QUESTIONS.turns_to_keep(four, n_sentences=20)
    assert (n, verdict.reason) == (3, "turn_adds_claims")
    # a bad second turn leaves too few: the later turns build on it
    bad_second = dialogue(3)
    bad_second.turns[1].expert += " Critics praised it."
    assert QUESTIONS.turns_to_keep(bad_second, n_sentences=20)[0] == 0
    # a failure of the dialogue as a whole keeps nothing, whatever its turns
    n, verdict = QUESTIONS.turns_to_keep(dialogue(3), n_sentences=20, allowed=[3])
    assert (n, verdict.reason) == (0, "evidence_outside_input")
    assert QUESTIONS.turns_to_keep(dialogue(3), n_sentences=20)[0] == 3


def test_scores_are_kept_for_every_check() -> None:
    verdict = V.score_qa(
        qa(answer="Tesla Motors of Palo Alto in the state of California, USA, North America"),
        n_sentences=20,
    )
    failed = {c.name for c in verdict.failures}
    assert failed == {"answer_too_long", "answer_not_grounded"}
    assert len(verdict.checks) > len(failed)  # passed checks are recorded too


def test_limits_come_from_the_config() -> None:
    v = ItemValidator.from_config(
        GenerationConfig(answer_max_words=2, dialogue_min_turns=2, dialogue_max_turns=2)
    )
    assert v.score_qa(qa(), n_sentences=20).reason == "answer_too_long"  # 3 words
    assert v.score_dialogue(dialogue(2), n_sentences=20).keep


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


# ---- topic, give-away, turn grounding, quadruple, URL checks --------------------------------


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


@pytest.mark.parametrize(
    "expert",
    [
        "He was a founding member of OpenAI.",
        "Sure! Andrej Karpathy joined OpenAI in 2015 as a founding member.",
        "Yes, in 2015.",
        "In 2015 Karpathy joined OpenAI, as one of the founders.",  # "one" is not a number
    ],
)
def test_grounded_expert_turns_pass(expert: str) -> None:
    verdict = V.score_dialogue(dialogue(expert=expert), n_sentences=20)
    assert "turn_not_grounded" not in {c.name for c in verdict.failures}, verdict.detail


@pytest.mark.parametrize(
    ("expert", "why"),
    [
        ("Karpathy joined OpenAI as a founding member in 2016.", "number 2016"),
        ("He joined OpenAI with 12 colleagues in 2015.", "number 12"),
        ("Karpathy joined Google DeepMind as a research scientist.", "content words"),
        ("He studied physics at the University of Toronto.", "0/4"),
    ],
)
def test_ungrounded_expert_turns_are_rejected(expert: str, why: str) -> None:
    verdict = V.score_dialogue(dialogue(expert=expert), n_sentences=20)
    assert verdict.reason == "turn_not_grounded"
    assert "turn 2" in verdict.detail and why in verdict.detail
    assert "turn 0" not in verdict.detail and "turn 1" not in verdict.detail


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
        V.score_qa(changed(old_evidence_text=f"{OLD} {INJECTED}"), n_sentences=20),
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


def test_an_answer_mostly_spelled_out_by_its_question_is_rejected() -> None:
    item = qa(
        question="What does semaglutide do to blood sugar levels?",
        answer="decreases blood sugar levels",
        evidence_text="The drug decreases blood sugar levels.",
        title="Semaglutide",
    )
    verdict = V.score_qa(item, n_sentences=20)
    assert verdict.reason == "answerable_from_question" and "most words" in verdict.detail


def test_accented_latin_letters_are_not_garbled() -> None:
    item = qa(
        question="Where did Karpathy study, at Université de Montréal?", answer="1,200 students"
    )
    assert "garbled_text" not in {c.name for c in V.score_qa(item, n_sentences=20).failures}


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


def test_the_grammar_check_follows_the_config() -> None:
    assert ItemValidator.from_config(GenerationConfig()).grammar is not None
    off = GenerationConfig(quadruple_grammar_check=False)
    assert ItemValidator.from_config(off).grammar is None
    assert (
        ItemValidator.from_config(off)
        .score_quadruple(quad(relation="confirmed"), n_sentences=20)
        .keep
    )


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
