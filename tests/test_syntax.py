"""The dependency-parse check of quadruples on real sentences (wikisnap articles) and the
quadruples a real model (Qwen2.5-Coder-1.5B) wrote for them."""

from __future__ import annotations

import pytest

from pipeline.syntax import RelationParser

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
