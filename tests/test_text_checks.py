"""Text predicates of generated items: normalization, grounding, leaning and dangling
questions, timestamps, URLs, the sentence an answer or a reply comes from."""

from __future__ import annotations

import pytest

from pipeline.text_checks import (
    answer_sentence,
    contains_normalized,
    dangling_reference,
    find_url,
    is_grounded,
    is_iso_timestamp,
    leaning_phrase,
    normalize_answer,
    supporting_sentence,
)

EVIDENCE = (
    "A year later on February 13, 2024, an OpenAI spokesperson confirmed that Karpathy had "
    "left OpenAI. He had 1,200 students and two co-authors at Université de Montréal."
)


def test_normalize_answer() -> None:
    assert normalize_answer("The 1,200 Students!") == "1200 students"
    assert normalize_answer("Université de Montréal") == "universite de montreal"
    assert normalize_answer("two co-authors") == "2 co authors"
    assert normalize_answer("21st") == "21"
    assert normalize_answer("3.5%") == "3.5 percent"
    assert normalize_answer("A & B") == "and b"  # "a" is an article
    assert normalize_answer("") == ""
    assert normalize_answer("\u221212.4\u00a0%") == "-12.4 percent"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("\u221212.4", "-12.4"),  # Unicode minus
        ("\u201312.4", "-12.4"),  # en dash used as a minus
        ("fell to \u221212.4 \u00b0C", "fell to -12.4 \u00b0C"),
        ("2019\u20132020", "2019-2020"),
        ("2019\u20142020", "2019\u20102020"),
        ("80 percent", "80 per cent"),
        ("80%", "80 percent"),
        ("80\u00a0%", "80 Per Cent"),
        ("1,998", "1998"),
        ("US$1,234,567", "US$1234567"),
        ("1,234.5", "1234.5"),
        ("12\u2009000", "12000"),  # thin space
        ("12\u00a0000", "12000"),  # no-break space
        ("12\u202f000", "12,000"),  # narrow no-break space
        ("1.234.567", "1234567"),
        ("MACY'S", "macy's"),
        ("Macy\u2019s", "Macy's"),
        ("\u201cThriller\u201d", '"Thriller"'),
        ("Rock \u2018n\u2019 roll", "Rock 'n' roll"),
        ("U.S.", "US"),
        ("the U.S.A.", "USA"),
        ("New\u00a0York", "New York"),
        ("Universit\u00e9 de Montr\u00e9al", "Universite de Montreal"),
        ("two co-authors", "2 co authors"),
    ],
)
def test_normalization_treats_as_equal(a: str, b: str) -> None:
    assert normalize_answer(a) == normalize_answer(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("-12.4", "12.4"),  # the sign is kept
        ("\u221212.4", "12.4"),
        ("(\u20135)", "5"),
        ("2.5", "25"),  # a decimal point is not a thousands separator
        ("1.234", "1234"),  # one dotted group is ambiguous: left alone
        ("12 000", "12000"),  # a plain space may separate two numbers ("in 1995 200 people")
        ("2019\u20132020", "20192020"),
        ("Karpathy", "Karpathys"),
    ],
)
def test_normalization_keeps_apart(a: str, b: str) -> None:
    assert normalize_answer(a) != normalize_answer(b)


def test_grounding_understands_wikipedia_spellings() -> None:
    assert is_grounded("-12.4 \u00b0C", "The low was \u221212.4\u00a0\u00b0C in January.")
    assert not is_grounded("12.4", "The low was \u221212.4 \u00b0C in January.")
    assert is_grounded("2019-2020", "He coached the team in the 2019\u20132020 season.")
    assert is_grounded("US", "It is the largest U.S. bank.")
    assert is_grounded("12000", "The stadium seats 12\u00a0000 people.")
    assert is_grounded("80 per cent", "Turnout was 80% in 2019.")
    assert is_grounded("Macy's", "It was sold to Macy\u2019s in 1994.")
    assert not is_grounded("1,200", "He had 1 office and 200 staff.")  # not a list of 1 and 200


def test_grounding_is_whole_token_and_list_aware() -> None:
    assert is_grounded("February 13, 2024", EVIDENCE)
    assert is_grounded("the OpenAI", EVIDENCE)
    assert is_grounded("1200 students", EVIDENCE)
    assert is_grounded("Universite de Montreal", EVIDENCE)
    assert is_grounded("OpenAI and Karpathy", EVIDENCE)  # each part is there
    assert not is_grounded("Open", EVIDENCE)  # not a whole token
    assert not is_grounded("Tesla", EVIDENCE)
    assert not is_grounded("", EVIDENCE)
    assert not contains_normalized("the", EVIDENCE)


@pytest.mark.parametrize(
    "question",
    [
        "According to the passage, who left OpenAI?",
        "according to this text, who left?",
        "In the paragraph, which company is named?",
        "Based on the context, when did he leave?",
        "Who is the person mentioned above?",
        "As stated, what did the spokesperson confirm?",
        "What does the new sentence say about the CEO?",
        "From the given article, who is the chairman?",
        "What does this passage describe?",
    ],
)
def test_leaning_questions_are_caught(question: str) -> None:
    assert leaning_phrase(question)


@pytest.mark.parametrize(
    "question",
    [
        "Who confirmed Karpathy's departure from OpenAI in 2024?",
        "Which article of the US Constitution covers impeachment?",
        "In which context was the Model Y first shown?",
        "What passage did Magellan find?",
        "When was the passage of the Affordable Care Act?",
        # a work's kind followed by its name, an "of" or a clause that says which one
        "When was the film Oppenheimer released?",
        "What is the name of the series of Diffusion Transformers operating on latent space?",
        "What is the name of the novel that Florence Pugh will play the lead role of Cathy Ames "
        "in a limited series adaptation of?",
    ],
)
def test_standalone_questions_pass(question: str) -> None:
    assert leaning_phrase(question) is None
    assert dangling_reference(question) is None


@pytest.mark.parametrize(
    ("question", "word"),
    [
        ("What can these tests detect?", "these tests"),
        ("What is this model called?", "this model"),
        ("When did he join Ferrari?", "he"),
        ("What year was it founded?", "it"),
        ("In 2014, which label did they sign?", "they"),
        # dev gold: which film, which production, only the page says
        ("What character did Luke Y. Thompson call a 'womanizer' in the film?", "the film"),
        (
            "Who deemed Florence Pugh's performance to be the production's prime asset?",
            "the production",
        ),
    ],
)
def test_questions_pointing_at_an_unnamed_thing_are_caught(question: str, word: str) -> None:
    assert dangling_reference(question) == word


@pytest.mark.parametrize(
    "question",
    [
        "Which team did Russell join after he left Williams?",
        "In what year did Sony Music have its best singles success?",
        "Who founded Apple in 1976?",
    ],
)
def test_pronouns_after_a_name_pass(question: str) -> None:
    assert dangling_reference(question) is None


def test_iso_timestamps() -> None:
    for ok in ("2024", "2024-02", "2024-02-29"):
        assert is_iso_timestamp(ok)
    for bad in ("2023-02-29", "2024-13", "24-02-01", "2024/02/01", "Feb 2024", "2024-2"):
        assert not is_iso_timestamp(bad)


@pytest.mark.parametrize(
    "text",
    [
        "visit http://evil.example today",
        "HTTPS://Evil.Example/login",
        "see www.evil.example",
        "write to press@evil.example",
        "evil.example/free-prizes",
        "go to evil.com now",
    ],
)
def test_urls_are_found(text: str) -> None:
    assert find_url(text)


@pytest.mark.parametrize(
    "text",
    [
        "Amazon.com, Inc. was founded by Jeff Bezos.",
        "the largest U.S. bank",
        "a speed of 120 km/h",
        "AT&T and/or Verizon",
        "Ph.D./M.Sc. programmes",
        "the ASP.NET framework",
        "a.k.a. the co-founder",
        "rose 3.5% in 2019",
    ],
)
def test_prose_is_not_a_url(text: str) -> None:
    assert find_url(text) is None


PARAGRAPH = {
    10: "In 2015, Karpathy joined OpenAI as a founding member.",
    11: "In 2017, he became the director of artificial intelligence at Tesla.",
    12: "He left Tesla in July 2022.",
}


@pytest.mark.parametrize(
    ("expert", "cited", "credited"),
    [
        ("He joined OpenAI in 2015, as a founding member.", 10, 10),  # right citation kept
        ("Tesla made him its director of artificial intelligence in 2017.", 10, 11),  # neighbour
        ("He left Tesla in July 2022.", 11, 12),
        ("He studied physics in Toronto.", 11, 11),  # supported by none: left for validation
    ],
)
def test_a_reply_is_credited_to_the_sentence_that_states_it(
    expert: str, cited: int, credited: int
) -> None:
    assert supporting_sentence(expert, cited, PARAGRAPH, "Andrej Karpathy") == credited


@pytest.mark.parametrize(
    ("answer", "cited", "evidence"),
    [
        ("2015", [10], [10]),
        ("July 2022", [11], [12]),  # the one offered sentence that holds it
        ("Tesla", [10], [10]),  # in two offered sentences: the citation stands (and fails)
        ("Zanzibar", [10], [10]),
    ],
)
def test_an_answer_is_credited_to_the_one_sentence_that_holds_it(
    answer: str, cited: list[int], evidence: list[int]
) -> None:
    assert answer_sentence(answer, cited, PARAGRAPH) == evidence


@pytest.mark.parametrize(
    ("a", "b"),
    [("May 15, 2021", "15 May 2021"), ("1st February 2024", "February 1, 2024")],
)
def test_one_date_in_two_spellings_is_equal(a: str, b: str) -> None:
    assert normalize_answer(a) == normalize_answer(b)
    assert is_grounded(a, f"It was released on {b}.")
