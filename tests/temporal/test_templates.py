"""Temporal questions written from the facts' own words: the relation turned around its
object, "who" only for a person, the article its sentence gives the subject, and the same
checks as the model's phrasings."""

from __future__ import annotations

import pytest

from pipeline.temporal.phrasing import without_ambiguity
from pipeline.temporal.questions import Fact, c2_specs, c3_specs, question_specs
from pipeline.temporal.templates import template_phrasings, template_question
from tests.temporal.test_questions import COACHES, fact


def said(item_id: str, subject: str, relation: str, obj: str, when: str, sentence: str) -> Fact:
    """A dated fact with its real evidence sentence (wikisnap articles)."""
    f = fact(item_id, subject, relation, obj, when)
    return Fact(**{**vars(f), "evidence_text": sentence})


BARCLAYS = said("b", "Barclays", "acquired", "Mercantile Credit Company", "1975-08",
                "In August 1975, following the secondary banking crash, Barclays acquired "
                "Mercantile Credit Company.")  # fmt: skip
PUGH = said("p", "Pugh", "was awarded", "Trophée Chopard", "2019",
            "Pugh was awarded the Trophée Chopard at the 2019 Cannes Film Festival.")  # fmt: skip
ROSS = said("r", "Ross Reels", "had been acquired by", "3M", "2010",
            "Ross Reels had been acquired by 3M in 2010.")  # fmt: skip
DRAFT = said("d", "Nuggets", "drafted", "Michael Porter Jr.", "2018",
             "In the 2018 NBA draft, the Nuggets drafted Michael Porter Jr. and traded with the "
             "Magic to get Jarred Vanderbilt.")  # fmt: skip
MOVED = said("m", "3M", "moved to", "Saint Paul", "1910",
             "The company moved to Saint Paul in 1910, where it remained.")  # fmt: skip
BASED = said("t", "Turner Broadcasting System", "was based in", "Atlanta", "1965",
             "Turner Broadcasting System was based in Atlanta in 1965.")  # fmt: skip
STARRED = said("s", "Pascal", "starred in", "The Last of Us", "2023",
               "In 2023, Pascal starred in The Last of Us.")  # fmt: skip
BORN = said("p", "José Pedro Balmaceda Pascal", "was born in", "Santiago", "1975-04-02",
            "José Pedro Balmaceda Pascal was born on 2 April 1975 in Santiago, Chile.")  # fmt: skip
MERGER = said("w", "Time Warner", "acquired", "Turner Broadcasting System", "1996",
              "In 1996, the Time Warner merger brought Turner Broadcasting System into the "
              "company; Time Warner acquired Turner Broadcasting System.")  # fmt: skip
AWARD = said("c", "Cisco", "received", "Innovation Preparedness award", "2011",
             "In 2011, Cisco received the Innovation Preparedness award from the American Red "
             "Cross Silicon Valley Chapter.")  # fmt: skip
FINE = said("b", "Barclays Bank", "agreed to pay", "$3.6m", "1998",
            "In 1998, Barclays Bank agreed to pay $3.6m to settle the case.")  # fmt: skip
SUED = said("s", "state of Minnesota", "sued", "3M", "2010",
            "In 2010, the state of Minnesota sued 3M for $5 billion.")  # fmt: skip


def c1(f: Fact) -> str | None:
    (spec,) = [s for s in question_specs([f]) if s.category == "C1"]
    return template_question(spec)


@pytest.mark.parametrize(
    ("f", "question"),
    [
        (BARCLAYS, "What did Barclays acquire in August 1975?"),  # do-support, the lemma
        (PUGH, "What was Pugh awarded in 2019?"),  # the auxiliary goes first
        (ROSS, "What had Ross Reels been acquired by in 2010?"),
        (DRAFT, "Who did the Nuggets draft in 2018?"),  # a person; "the" as the sentence has it
        (MOVED, "What did 3M move to in 1910?"),  # "moved to" a place, whatever NER says
        (BASED, "Where was Turner Broadcasting System based in 1965?"),  # a place: "where"
        (STARRED, "In 2023, what did Pascal star in?"),  # not "in in"
        (MERGER, "What did Time Warner acquire in 1996?"),  # "the" of "the Time Warner merger"
        (BORN, "Where was José Pedro Balmaceda Pascal born on 2 April 1975?"),
        (AWARD, "What award did Cisco receive in 2011?"),  # the kind the object names
        (FINE, "What did Barclays Bank agree to pay in 1998?"),  # a value: not "What m"
    ],
)
def test_c1_turns_the_relation_around_its_object(f: Fact, question: str) -> None:
    assert c1(f) == question


def test_the_articles_person_is_named_in_full() -> None:
    joined = said("a", "Altman", "joined", "Y Combinator", "2011",
                  "In 2011 Altman joined Y Combinator, a startup accelerator.")  # fmt: skip
    assert c1(Fact(**{**vars(joined), "title": "Sam Altman"})) == (
        "What did Sam Altman join in 2011?"
    )
    graduated = said("g", "Jack Smith (lawyer)", "graduated from", "Liverpool High School",
                     "1987", "He graduated from Liverpool High School in 1987.")  # fmt: skip
    assert c1(Fact(**{**vars(graduated), "title": "Jack Smith (lawyer)"})) == (
        "What did lawyer Jack Smith graduate from in 1987?"
    )
    # a team's short name keeps its sentence's "the"; a firm is no surname of its product
    opened = said("o", "Dolphins", "opened", "a training facility", "1993",
                  "In 1993, the Dolphins opened a training facility.")  # fmt: skip
    assert c1(Fact(**{**vars(opened), "title": "Miami Dolphins"})) == (
        "What facility did the Dolphins open in 1993?"
    )
    launched = said("t", "Tesla", "launched", "an online design studio", "2020-06-05",
                    "On June 5, 2020, Tesla launched an online design studio.")  # fmt: skip
    assert c1(Fact(**{**vars(launched), "title": "Tesla Model Y"})) == (
        "What studio did Tesla launch on 5 June 2020?"
    )


def test_the_articles_person_as_object_is_asked_with_who() -> None:
    """By surname, as the sentence names him, though the tagger calls "Altman" a place (dev
    gold, Sam Altman); a team's short name after "the" stays a "what"."""
    sued = said("m", "Musk", "sued", "Altman", "2024-02",
                "In late February 2024 Musk sued OpenAI and Altman, alleging they broke the "
                "company's founding agreement.")  # fmt: skip
    assert c1(Fact(**{**vars(sued), "title": "Sam Altman"})) == "Who did Musk sue in February 2024?"
    coached = said("c", "Nick Saban", "coached", "Dolphins", "2005",
                   "Nick Saban coached the Dolphins in the 2005 and 2006 seasons.")  # fmt: skip
    assert c1(Fact(**{**vars(coached), "title": "Miami Dolphins"})) == (
        "What did Nick Saban coach in 2005?"
    )


def test_a_noun_relation_asks_for_the_holder_of_the_role() -> None:
    first = [s for s in question_specs(COACHES) if s.category == "C1"][0]
    assert template_question(first) == "Who was the head coach of Chelsea F.C. in September 2022?"
    assert template_question(c2_specs(COACHES)[0]) == (
        "Who was the head coach of Chelsea F.C. between September 2022 and July 2023?"
    )
    (timeline,) = [s for s in question_specs(COACHES) if s.category == "timeline"]
    assert template_question(timeline) == "Who is the current head coach of Chelsea F.C.?"


def test_c2_asks_over_the_span_and_c3_adds_the_second_fact_as_a_clause() -> None:
    later = said("b2", "Barclays", "acquired", "Kensington Mortgages", "2023-03-01",
                 "On 1 March 2023, Barclays acquired specialist mortgage lender, Kensington "
                 "Mortgages.")  # fmt: skip
    assert c2_specs([BARCLAYS, later]) == []  # a list the text may give in part: not asked
    (c2,) = c2_specs([BARCLAYS, later], "all")
    assert template_question(c2) == (
        "What did Barclays acquire between August 1975 and 1 March 2023?"
    )
    (bridge,) = c3_specs([SUED, MOVED])
    assert template_question(bridge) == (
        "What did the state of Minnesota sue in 2010 that moved to Saint Paul in 1910?"
    )
    founded = said("f", "CBS Corporation", "founded", "CBS Records", "2006",
                   "CBS Corporation founded a new CBS Records in 2006.")  # fmt: skip
    bought = said("y", "Sony", "acquired", "CBS Records", "1987-11-17",
                  "On November 17, 1987, Sony acquired CBS Records for US$2 billion.")  # fmt: skip
    (shared,) = c3_specs([bought, founded])
    assert template_question(shared) == (
        "What did CBS Corporation found in 2006 that Sony acquired on 17 November 1987?"
    )


def test_undated_facts_are_left_out_of_c2_and_c3() -> None:
    drafted_then = said("e", "Nuggets", "drafted", "Emmanuel Mudiay", "", "The Nuggets "
                        "drafted Emmanuel Mudiay.")  # fmt: skip
    undated = Fact(**{**vars(drafted_then), "timestamp": None, "observed_at": "2024-01-01"})
    assert c2_specs([DRAFT, undated]) == []  # seen in 2024 is not drafted in 2024
    assert c3_specs([SUED, Fact(**{**vars(MOVED), "timestamp": None})]) == []


def test_phrasings_are_checked_and_unturnable_or_ambiguous_ones_rejected() -> None:
    leading = said("l", "Aston Martin", "leading", "the standings", "2024", "Aston Martin "
                   "leading the standings in 2024.")  # fmt: skip
    other = said("b3", "Barclays", "acquired", "Woolwich", "1975-08",
                 "In August 1975, Barclays acquired Woolwich.")  # fmt: skip
    specs = [s for s in question_specs([leading, BARCLAYS, other, PUGH]) if s.category == "C1"]
    phrasings = without_ambiguity(specs, template_phrasings(specs))
    outcome = {s.facts[0].item_id: p for s, p in zip(specs, phrasings, strict=True)}
    assert (outcome["l"].question, outcome["l"].reason) == (None, "no_template")
    # "What did Barclays acquire in August 1975?" is right for neither acquisition alone
    assert outcome["b"].reason == outcome["b3"].reason == "ambiguous"
    assert (outcome["p"].question, outcome["p"].reason) == ("What was Pugh awarded in 2019?", None)
