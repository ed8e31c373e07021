"""The dependency-parse check of quadruples on real sentences (wikisnap articles) and the
quadruples a real model (Qwen2.5-Coder-1.5B) wrote for them."""

from __future__ import annotations

import pytest

from pipeline.syntax import RelationParser, actor_problem

PARSER = RelationParser()

PASCAL_FAMILY = (
    "Nine months after his birth, his family sought refuge in the Venezuelan embassy in "
    "Santiago, and later received political asylum in Denmark."
)
PASCAL_RAISED = (
    "Ultimately, the family moved to the United States, where Pascal was raised in San Antonio, "
    "Texas, until they relocated to Orange County, California, when he was 11 years old."
)
NEWEY = (
    "Adrian Newey, who left Red Bull Racing in May 2024, is due to join Aston Martin on 1 March "
    "2025, in time for the 2026 regulations."
)
MUSK = (
    "Musk has said that the new heat pump system is one of the two most significant changes in "
    "the Model Y over the Model 3, the other being the new single-piece castings."
)

# (title, subject, relation, object, sentence): facts the sentence's grammar carries
STATED = [
    (
        "3M",
        "DuPont",
        "purchased",
        "PFOA",
        "In 1951, DuPont purchased PFOA from then-Minnesota Mining and Manufacturing Company "
        "for use in the manufacturing of teflon.",
    ),
    # spaCy splits "3M" into two tokens
    (
        "3M",
        "3M",
        "produces approximately",
        "60,000 products",
        "As of 2019, 3M produces approximately 60,000 products.",
    ),  # fmt: skip
    ("Pedro Pascal", "Pedro Pascal", "relocated to", "Orange County, California", PASCAL_RAISED),
    ("Pedro Pascal", "Pedro Pascal", "was raised in", "San Antonio, Texas", PASCAL_RAISED),
    # the verb is a "have" of the sentence's own
    (
        "Pedro Pascal",
        "Pedro Pascal",
        "had his breakout role as",
        "Oberyn Martell",
        "Pascal had his breakout role as Oberyn Martell in the fourth season of the HBO fantasy "
        "series Game of Thrones (2014).",
    ),
    # "is due to join": the subject of "is" does the joining
    ("Aston Martin in Formula One", "Adrian Newey", "will join", "Aston Martin", NEWEY),
    ("Aston Martin in Formula One", "Adrian Newey", "left", "Red Bull Racing", NEWEY),
    (
        "Letitia James",
        "Letitia James",
        "vowed to pursue",
        "Donald Trump",
        "During her campaign, James vowed to pursue Donald Trump, who she said was an "
        "“illegitimate president” and an “embarrassment.”",
    ),
    # a copula with no other relation word is not judged here
    (
        "Pedro Pascal",
        "José Pedro Balmaceda Pascal",
        "is",
        "Chilean",
        "José Pedro Balmaceda Pascal (born April 2, 1975) is a Chilean and American actor.",
    ),
    (
        "IPhone 15",
        "iPhone 15",
        "launched with",
        "iOS 17",
        "The iPhone 15 and iPhone 15 Plus launched with iOS 17 and is compatible with iOS 18.",
    ),  # fmt: skip
    # "the company" stands for the article's entity
    (
        "3M",
        "3M",
        "will be known as",
        "Solventum Corporation",
        "The company will be known as Solventum Corporation.",
    ),  # fmt: skip
]

# (title, subject, relation, object, sentence, what the reason says)
NOT_STATED = [
    ("Pedro Pascal", "Pedro Pascal", "sought refuge in", "the Venezuelan embassy in Santiago",
     PASCAL_FAMILY, "'his family'"),
    ("Pedro Pascal", "Pedro Pascal", "received political asylum in", "Denmark", PASCAL_FAMILY,
     "'his family'"),
    ("Tesla Model Y", "Tesla Model Y", "delivered", "1.2 million Model Ys",
     "In 2023, Tesla delivered 1.2 million Model Ys, making it the world's best-selling vehicle "
     "that year.", "'tesla'"),
    ("Dark energy", "Dark energy", "status", "a hypothetical force",
     "Dark energy's status as a hypothetical force with unknown properties makes it an active "
     "target of research.", "no verb"),
    ("3M", "DuPont", "refused to call it", "C8", "DuPont referred to PFOA as C8.",
     "no word of relation"),
    ("Tesla Model Y", "Musk", "has said", "the new single-piece castings", MUSK,
     "another clause"),
    ("Letitia James", "Letitia James", "filed a civil lawsuit", "New York Supreme Court",
     "In August 2020, James filed a civil lawsuit in New York Supreme Court against the National "
     "Rifle Association of America (NRA).", "'in'"),
    ("Letitia James", "Letitia James", "won the runoff election", "Daniel Squadron",
     "James won the runoff election on October 1, 2013, against Daniel Squadron, 59.4%–40.6%.",
     "'against'"),
    ("3M", "3M", "announced", "William Brown is appointed chief executive officer",
     "On March 12, 2024 3M announced that William Brown is appointed chief executive officer "
     "from May 1, 2024.", "clause"),
    ("Aston Martin in Formula One", "Aston Martin", "will produce its own transmission gearbox",
     "package", "In addition, Aston Martin will produce its own transmission gearbox package for "
     "the first time.", "the relation holds"),
    ("Aston Martin in Formula One", "Aston Martin", "continued to perform poorly",
     "through the 1960 season", "They continued to perform poorly through the 1960 season, once "
     "again failing to score any points.", "prepositional phrase"),
    # the object belongs to a second predicate of the sentence
    ("Arvind Krishna", "Arvind Krishna", "is married", "two children",
     "Krishna is married and has two children.", "what 'has' takes"),
    ("IPhone 15", "iPhone 15", "launched with", "iOS 18",
     "The iPhone 15 and iPhone 15 Plus launched with iOS 17 and is compatible with iOS 18.",
     "iOS 18"),
    ("Liquid biopsy", "a wide variety of biomarkers", "may be studied", "other diseases",
     "A wide variety of biomarkers may be studied to detect or monitor other diseases.",
     "takes, not 'studied'"),
    ("Aston Martin in Formula One", "Aston Martin", "failed to score any points", "once again",
     "They continued to perform poorly through the 1960 season, once again failing to score any "
     "points.", "adverb"),
    ("Arvind Krishna", "Arvind Krishna", "held", "General Manager role in software and",
     "Next he held General Manager role in software and systems and technology group of IBM.",
     "cut off"),
]  # fmt: skip


@pytest.mark.parametrize(("title", "subject", "relation", "obj", "sentence"), STATED)
def test_facts_the_grammar_carries_pass(
    title: str, subject: str, relation: str, obj: str, sentence: str
) -> None:
    assert PARSER.problem(subject, relation, obj, sentence, title) == ""


@pytest.mark.parametrize(("title", "subject", "relation", "obj", "sentence", "says"), NOT_STATED)
def test_facts_the_grammar_does_not_carry_are_named(
    title: str, subject: str, relation: str, obj: str, sentence: str, says: str
) -> None:
    assert says in PARSER.problem(subject, relation, obj, sentence, title)


def test_each_sentence_is_parsed_once() -> None:
    parser = RelationParser()
    parser.problem("Adrian Newey", "left", "Red Bull Racing", NEWEY, "Aston Martin")
    cached = parser._docs[NEWEY]
    parser.problem("Adrian Newey", "will join", "Aston Martin", NEWEY, "Aston Martin")
    assert parser._docs[NEWEY] is cached and len(parser._docs) == 1


ALTMAN_ACCUSED = (
    "In May 2024, after OpenAI's non-disparagement agreements were exposed, Altman was accused "
    "of lying when claiming to have been unaware of the equity cancellation provision for "
    "departing employees that don't sign the agreement."
)
HAMILTON_LEAVES = (
    "On 1 February 2024, Mercedes confirmed Hamilton would leave the team after 11 years, with "
    "the seven-time champion signing a multi year contract to drive for Ferrari from 2025 onwards."
)
OKLO_MERGER = "In May 2024, Oklo Inc. completed a merger with the SPAC to become a public company."
# (title, question, evidence, the actor the evidence names instead): the dev gold's questions
SWAPPED = [
    ("Sam Altman", "In which month was OpenAI accused of lying about the equity provision?",
     ALTMAN_ACCUSED, "altman"),
    ("Mercedes-Benz in Formula One", "When was Mercedes-Benz confirmed to leave the Formula One "
     "team?", HAMILTON_LEAVES, "hamilton"),
    ("Sam Altman", "What company did Sam Altman merge with in May 2024 to become a public "
     "company?", OKLO_MERGER, "oklo"),
    # a passive turned from an active sentence; the colon is in a name, not after a label
    ("Tesla Model Y", "When was Consumer Reports named the 2024 Model Y to its 'Best Cars of "
     "the Year: 10 Top Picks of 2024' list?", "In March 2024, Consumer Reports named the 2024 "
     'Model Y to its "Best Cars of the Year: 10 Top Picks of 2024" list.', "model y"),
]  # fmt: skip
# (title, question, evidence): the evidence's actor may be the question's
SAME_ACTOR = [
    ("Sam Altman", "When was Altman accused of lying?", ALTMAN_ACCUSED),
    ("Sam Altman", "When was Sam Altman accused of lying?", ALTMAN_ACCUSED),
    ("Mercedes-Benz in Formula One", "When did Mercedes confirm that Hamilton would leave the "
     "team?", HAMILTON_LEAVES),
    ("Mercedes-Benz in Formula One", "When did Hamilton leave?", HAMILTON_LEAVES),
    # a common noun or a part of the title could be anyone / the article's entity
    ("Barclays", "When did Barclays announce the acquisition of Tesco Bank's operations?",
     "In February 2024, the bank announced the acquisition of the Tesco Bank's operations."),
    ("Tesla Model Y", "When did Tesla start production of the Model Y at the Fremont Factory?",
     "After its 2019 introduction, the Model Y started production at the Fremont Factory in "
     "January 2020."),
    # an abbreviation names its expansion
    ("Semaglutide", "When did the FDA expand the indication for semaglutide?",
     "In March 2024, the US Food and Drug Administration expanded the indication for "
     "semaglutide."),
    ("United States Department of Homeland Security", "What does the Department of Homeland "
     "Security contain?", "DHS contains operational components and support components."),
    # a label before the question is not its subject
    ("Radeon RX 7000 series", "Radeon RX 7000 series: The Navi 31 module features what "
     "transistors?", "The Navi 31 module features 58 billion transistors."),
    # the evidence does not use the verb: another check's business
    ("Sam Altman", "When did OpenAI fire Altman?", ALTMAN_ACCUSED),
]  # fmt: skip


@pytest.mark.parametrize(("title", "question", "evidence", "instead"), SWAPPED)
def test_a_question_giving_an_action_to_another_actor_is_named(
    title: str, question: str, evidence: str, instead: str
) -> None:
    assert instead in actor_problem(question, evidence, title)


@pytest.mark.parametrize(("title", "question", "evidence"), SAME_ACTOR)
def test_a_question_keeping_who_did_what_passes(title: str, question: str, evidence: str) -> None:
    assert actor_problem(question, evidence, title) == ""
