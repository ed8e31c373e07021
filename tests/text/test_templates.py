"""Tests of pipeline.text.templates: template calls rendered to plain text.

Templates are rendered through :func:`pipeline.text.render_template`, the tree walker that
hands each template node to the registry, as in real articles.
"""

from __future__ import annotations

import pytest

from pipeline.text import render_template
from pipeline.text.templates import TEMPLATE_NAMES
from tests.conftest import load_wikisnap_revision

# ---------------------------------------------------------------------------------------
# template rendering on small strings
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # convert / cvt: input value and unit only
        ("{{convert|80|mph}}", "80 mph"),
        ("{{cvt|135|mph}}", "135 mph"),
        ("{{convert|1|to|3|km}}", "1 to 3 km"),
        ("{{convert|1|-|3|km}}", "1–3 km"),
        ("{{cvt|0|–|60|mph}}", "0–60 mph"),
        ("{{convert|5|and|10|kg}}", "5 and 10 kg"),
        ("{{Convert|1.25|kg|4=2|abbr=off}}", "1.25 kilograms"),
        ("{{convert|1|mi|km|abbr=off}}", "1 mile"),
        ("{{convert|80|mi|km|adj=on}}", "80-mile"),
        ("{{convert|7.8|mm|in|abbr=on}}", "7.8 mm"),
        ("{{convert|566000|sqft|m2}}", "566,000 sq ft"),
        ("{{convert|60000|m2|sqft|abbr=on}}", "60,000 m2"),
        ("{{convert|6|ft|2|in|m}}", "6 ft 2 in"),
        ("{{Convert | 4 | mi | 0 | spell = in}}", "four miles"),
        ("{{convert|75|Moilbbl/d}}", "75 million barrels per day"),
        ("{{convert|20|F|C}}", "20 °F"),
        ("{{Template:Convert|3|km}}", "3 km"),
        ("{{ convert_ |3|km}}", "3 km"),
        # dates: no computed age, Month D, YYYY unless df=y
        ("{{birth date|1985|4|22}}", "April 22, 1985"),
        ("{{birth date and age|1985|1|3}}", "January 3, 1985"),
        ("{{Birth date and age|df=yes|1996|1|3}}", "3 January 1996"),
        ("{{death date and age|2020|1|2|1930|5|6}}", "January 2, 2020"),
        ("{{death date|2020|1|2|df=y}}", "2 January 2020"),
        ("{{start date|2023|02|22}}", "February 22, 2023"),
        ("{{end date|2023|2}}", "February 2023"),
        ("{{start date and age|1999}}", "1999"),
        ("{{Start date and age|2022|Dec|13|paren=y|br=y}}", "December 13, 2022"),
        ("{{Birth date and age|June 5, 1969}}", "June 5, 1969"),
        ("{{dts|2020-01-02}}", "January 2, 2020"),
        ("{{dts|2020|1|2|format=dmy}}", "2 January 2020"),
        ("{{date|2006-01-02}}", "January 2, 2006"),
        ("{{date|2006-01-02|dmy}}", "2 January 2006"),
        ("{{birth based on age as of date|41|2010|08|30|noage=1}}", "1968 or 1969"),
        ("Bob (aged {{age|1985|4|22}}) spoke.", "Bob spoke."),
        # as of
        ("{{as of|2023|5}}", "As of May 2023"),
        ("{{As of|2023}}", "As of 2023"),
        ("{{as of|2023|5|lc=y}}", "as of May 2023"),
        ("{{as of|2023|7|29|lc=y|df=US}}", "as of July 29, 2023"),
        ("{{as of|2023|7|29}}", "As of 29 July 2023"),
        ("{{As of|2020|April}}", "As of April 2020"),
        ("{{As of|alt=around 2021|2021|01|post=.}}", "around 2021."),
        ("{{asof|2022|7|lc=y}}", "as of July 2022"),
        # numbers and quantities
        ("{{formatnum:1234567}}", "1,234,567"),
        ("{{formatnum:1234567.5}}", "1,234,567.5"),
        ("{{val|1.23|u=m}}", "1.23 m"),
        ("{{val|6.02|e=23}}", "6.02×10^23"),
        ("{{val|1.8|e=17|ul=J}}", "1.8×10^17 J"),
        ("{{val|100|u=[[Electronvolt|meV]]}}", "100 meV"),
        ("{{val|1.23|0.01|u=m}}", "1.23±0.01 m"),
        ("{{val|e=−18|u=m}}", "10^−18 m"),
        ("{{10^|21}}", "10^21"),
        ("{{frac|1|2}}", "1/2"),
        ("{{sfrac|1|1000}}", "1/1000"),
        ("{{frac|2|1|2}}", "2 1/2"),
        ("{{ordinal|3}}", "3rd"),
        ("{{ordinal|11}}", "11th"),
        ("{{ordinal|22}}", "22nd"),
        ("{{circa|1990}}", "c. 1990"),
        ("{{c.|1990}}", "c. 1990"),
        # money
        ("{{US$|100 million}}", "US$100 million"),
        ("{{USD|13.97 billion}}", "US$13.97 billion"),
        ("{{USD|51.56 [[1,000,000,000|billion]]|link=yes}}", "US$51.56 billion"),
        ("{{US$|1000000}}", "US$1,000,000"),
        ("{{currency|100|EUR}}", "€100"),
        ("{{GBP|5 million}}", "£5 million"),
        ("{{£|5}}", "£5"),
        ("{{€|7}}", "€7"),
        ("{{INR|8 crore}}", "₹8 crore"),
        ("{{dollarsign|US}}5 billion", "US$5 billion"),
        ("{{Format price|8858000000}}", "8.858 billion"),
        ("{{Format price|1742000000}}", "1.742 billion"),
        ("{{Format price|2500000}}", "2.5 million"),
        ("{{inflation|US|100|1990}}", "100"),
        # text wrappers
        ("{{nowrap|$25 million}}", "$25 million"),
        ("{{nobr|1=E=mc}}", "E=mc"),
        ("{{lang|fr|Coupe des Clubs}}", "Coupe des Clubs"),
        ("{{lang-de|Silberpfeile}}", "Silberpfeile"),
        ("{{langx|de|Silberpfeile}}", "Silberpfeile"),
        ("{{transl|ja|Tōkyō}}", "Tōkyō"),
        ("{{ill|BluTV|tr}}", "BluTV"),
        ("{{ill|Foo|de|lt=Bar}}", "Bar"),
        ("{{abbr|CMB|cosmic microwave background}}", "CMB"),
        ("{{small|Acting}}", "Acting"),
        ("{{em|unbuffered}}", "unbuffered"),
        ("{{sic|recieve}}", "recieve [sic]"),
        ("{{math|''E'' {{=}} ''mc''<sup>2</sup>}}", "E = mc2"),
        ("a{{ndash}}b", "a–b"),
        ("a{{snd}}b", "a – b"),
        ("a{{mdash}}b", "a—b"),
        ("a{{spaced ndash}}b", "a – b"),
        ("5{{nbsp}}km", "5 km"),
        ("''[[CNET]]''{{'}}s review", "CNET's review"),
        ("''British Vogue''{{'s}} editor", "British Vogue's editor"),
        ("{{OV|103}}", "Space Shuttle Discovery"),
        ("{{F1|2014}}", "2014"),
        ("{{F1 GP|2011|Australian}}", "2011 Australian Grand Prix"),
        ("{{coord|30|33|46.42|N|90|46|27.27|W}}", "30°33′46.42″N 90°46′27.27″W"),
        ("{{coord|38.9|-77.0|display=title}}", ""),
        ("{{slink|Dark_energy#Theories_of_dark_energy}}", "Dark energy § Theories of dark energy"),
        ("{{CO2}} emissions", "CO2 emissions"),
        # unknown and maintenance templates vanish
        ("text{{citation needed|date=May 2023}}.", "text."),
        ("text{{cn}} more", "text more"),
        ("{{Some unknown template|x=1}}", ""),
        ("Barclays ({{IPAc-en|b}} or {{IPAc-en|c}}) is a bank.", "Barclays is a bank."),
        # a gap after a word that needs an object is a lost fact: it stays visible
        ("It measured {{unknown|5}}.", "It measured."),
        ("It measured about {{unknown|5}}.", "It measured about ."),
        ("(from {{unknown|5}})", "(from )"),
        ("{{#if:x|y|z}}", ""),
    ],
)
def test_render_template(wikitext: str, expected: str) -> None:
    assert render_template(wikitext) == expected


def test_registry_names_are_normalised() -> None:
    assert "convert" in TEMPLATE_NAMES and "cvt" in TEMPLATE_NAMES
    assert all(name == name.lower().strip() and "_" not in name for name in TEMPLATE_NAMES)
    assert render_template("{{CONVERT|2|km}}") == render_template("{{convert|2|km}}") == "2 km"
    assert render_template("{{As_of|2020}}") == "As of 2020"


# ---------------------------------------------------------------------------------------
# template calls found in real wikisnap revisions
# ---------------------------------------------------------------------------------------

REAL_TEMPLATE_CALLS = [
    # (page_id, date, template call found verbatim in the revision, rendering)
    (48917251, "2023-01-01", "{{Birth date and age|df=yes|1996|1|3}}", "3 January 1996"),
    (22476815, "2023-06-01", "{{Birth date and age|1985|04|22}}", "April 22, 1985"),
    (1071662, "2023-01-01", "{{Start date and age|1929|9|9}}", "September 9, 1929"),
    (
        72175749,
        "2023-01-01",
        "{{Start date and age|2022|Dec|13|paren=y|br=y}}",
        "December 13, 2022",
    ),
    (1071662, "2023-01-01", "{{Format price|8858000000}}", "8.858 billion"),
    (51746, "2024-01-01", "{{as of|2023|7|29|lc=y|df=US}}", "as of July 29, 2023"),
    (49033638, "2023-01-01", "{{cvt|0|–|60|mph}}", "0–60 mph"),
    (51746, "2023-01-01", "{{USD|51.56 [[1,000,000,000|billion]]|link=yes}}", "US$51.56 billion"),
]


@pytest.mark.parametrize(("page_id", "date", "call", "expected"), REAL_TEMPLATE_CALLS)
def test_real_template_calls(page_id: int, date: str, call: str, expected: str) -> None:
    # These sit in infoboxes/tables (dropped), so the call itself is rendered.
    assert call in load_wikisnap_revision(page_id, date)["content"]
    assert render_template(call) == expected
