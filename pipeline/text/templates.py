"""Wikitext templates -> plain text: the registry of template renderers.

This module's one job is to turn one template call (``{{convert|80|mph}}``, dates,
currencies, ``{{as of}}``, ``{{val}}``, ``{{lang}}``, parser functions such as
``{{formatnum:...}}``) into the text a reader of the article sees. The tree walk that meets
the templates lives in :mod:`pipeline.text.wikitext`: it hands each template node to
:func:`render_template_node` together with itself, so that template arguments (which hold
links, formatting and nested templates) are rendered by the same walker. Unknown templates
render as "".

Rendering choices that keep the text stable across snapshots: dates render without the
computed age (``{{birth date and age}}`` -> "April 22, 1985"), ``{{age}}`` and other
"now"-dependent templates render nothing (an emptied "(aged )" is removed with them),
``{{inflation}}`` renders its original value, never the computed one. Other choices:
``{{convert}}`` shows the input value with the unit symbol ("80 mph"; unit names with
``abbr=off``, "80-mile" with ``adj=on``), never the converted value; ``{{Format price}}``
gives words like the template ("8.858 billion").

Why one long module: it is one table, about 240 templates each with a renderer of a few lines;
split by letter or by theme, a reader would have to guess which file a template is in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol

import mwparserfromhell
from mwparserfromhell.nodes import Template
from mwparserfromhell.wikicode import Wikicode

from pipeline.dates import MONTH_NAMES, MONTH_NUMBERS

__all__ = [
    "PLAIN_NUMBER",
    "TEMPLATE_NAMES",
    "InlineRenderer",
    "render_template_node",
]

_WS = re.compile(r"\s+")

# --------------------------------------------------------------------------------------
# Number and date helpers
# --------------------------------------------------------------------------------------

_ISO_DATE = re.compile(r"(-?\d{1,4})-(\d{1,2})(?:-(\d{1,2}))?(?:[T ].*)?")
PLAIN_NUMBER = re.compile(r"[-−+]?\d+(?:\.\d+)?")
_YES = frozenset({"y", "yes", "on", "true", "1"})


def _group_digits(number: str) -> str:
    """'1234567.5' -> '1,234,567.5'; text that is not a plain number is returned as is."""
    if not PLAIN_NUMBER.fullmatch(number):
        return number
    sign = number[0] if number[0] in "-−+" else ""
    body = number[len(sign) :]
    whole, dot, frac = body.partition(".")
    return f"{sign}{int(whole):,}{dot}{frac}"


def _month_number(value: str) -> int | None:
    value = value.strip().rstrip(".").lower()
    if value.isdigit():
        n = int(value)
        return n if 1 <= n <= 12 else None
    return MONTH_NUMBERS.get(value)


def _format_date(year: str, month: str = "", day: str = "", dmy: bool = False) -> str:
    """Year, month and day as given by a template -> "May 5, 2023" / "5 May 2023"."""
    year = year.strip()
    if not year:
        return ""
    if not month.strip():
        return year
    m = _month_number(month)
    if m is None:
        return " ".join(p.strip() for p in (day, month, year) if p.strip())
    name = MONTH_NAMES[m - 1]
    day = day.strip().lstrip("0")
    if not day:
        return f"{name} {year}"
    return f"{day} {name} {year}" if dmy else f"{name} {day}, {year}"


def _parse_date_args(values: Sequence[str]) -> tuple[str, str, str] | None:
    """(year, month, day) from a date template's positional args; None for free-form text."""
    values = [v.strip() for v in values]
    if not values or not values[0]:
        return None
    first = values[0]
    iso = _ISO_DATE.fullmatch(first)
    if iso:
        return iso.group(1), iso.group(2), iso.group(3) or ""
    if first.lstrip("-").isdigit():
        month = values[1] if len(values) > 1 else ""
        day = values[2] if len(values) > 2 else ""
        return first, month, day
    return None


_ONES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def _spell_number(value: str) -> str:
    """Spell whole numbers below 100 as words ({{convert|...|spell=in}}); others unchanged."""
    if not value.isdigit() or int(value) >= 100:
        return value
    n = int(value)
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def _ordinal_suffix(number: str) -> str:
    digits = number.strip().replace(",", "")
    if not digits.isdigit():
        return ""
    n = int(digits)
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


# --------------------------------------------------------------------------------------
# Arguments and the registry
# --------------------------------------------------------------------------------------


class InlineRenderer(Protocol):
    """What template rendering needs from the tree walker: wikicode -> plain text."""

    def inline(self, code: Wikicode) -> str:
        """Render a piece of wikicode (a template argument, a link label) to a string."""
        ...


class _Args:
    """Parameters of one template, rendered to plain text on first access."""

    __slots__ = ("_renderer", "_values", "_cache")

    def __init__(self, renderer: InlineRenderer, template: Template) -> None:
        self._renderer = renderer
        values: dict[str, Wikicode] = {}
        for param in template.params:
            values[str(param.name).strip()] = param.value  # a repeated name: the last wins
        self._values = values
        self._cache: dict[str, str] = {}

    def get(self, key: str | int, default: str = "") -> str:
        """The rendered, stripped value of a parameter ("" when absent or empty: default)."""
        key = str(key)
        if key in self._cache:
            value = self._cache[key]
        else:
            code = self._values.get(key)
            value = "" if code is None else _WS.sub(" ", self._renderer.inline(code)).strip()
            self._cache[key] = value
        return value or default

    def has(self, key: str | int) -> bool:
        """True when the parameter is given (even if empty)."""
        return str(key) in self._values

    def flag(self, *keys: str) -> bool:
        """True when any of the named parameters is set to yes/y/on/true/1."""
        return any(self.get(k).lower() in _YES for k in keys)

    def positional(self) -> list[str]:
        """Rendered positional parameters 1..n ("" for gaps)."""
        numbers = [int(k) for k in self._values if k.isdigit() and int(k) > 0]
        return [self.get(i) for i in range(1, max(numbers, default=0) + 1)]

    def nonempty_positional(self) -> list[str]:
        """Positional parameters without the empty ones."""
        return [v for v in self.positional() if v]


TemplateRenderer = Callable[["_Args"], str]
_REGISTRY: dict[str, TemplateRenderer] = {}
_BLOCK_TEMPLATES: set[str] = set()


def _template(*names: str, block: bool = False) -> Callable[[TemplateRenderer], TemplateRenderer]:
    """Register a renderer under names given in any case/underscore spelling."""

    def register(fn: TemplateRenderer) -> TemplateRenderer:
        for name in names:
            key = _template_key(name)
            _REGISTRY[key] = fn
            if block:
                _BLOCK_TEMPLATES.add(key)
        return fn

    return register


@lru_cache(maxsize=4096)
def _template_key(name: str) -> str:
    """Normalise a template name: case, underscores, runs of spaces, 'Template:' prefix."""
    key = " ".join(name.replace("_", " ").split()).lower()
    for prefix in ("template:", "safesubst:", "subst:"):
        if key.startswith(prefix):
            key = key[len(prefix) :].lstrip()
    return key


def render_template_node(renderer: InlineRenderer, node: Template) -> str:
    """Render one template through the registry ("" for unknown templates).

    ``renderer`` renders the template's arguments (the walker that met the template).
    """
    raw_name = str(node.name).strip()
    key = _template_key(raw_name)
    fn = _REGISTRY.get(key)
    if fn is not None:
        text = fn(_Args(renderer, node))
        if key in _BLOCK_TEMPLATES:
            return f"\n\n{text}\n\n" if text else "\n\n"
        return text
    if ":" in key:
        return _parser_function(renderer, raw_name, node)
    if key.startswith("lang-"):
        return _Args(renderer, node).get(1)
    return ""


def _parser_function(renderer: InlineRenderer, raw_name: str, node: Template) -> str:
    """{{formatnum:...}}, {{lc:...}}, {{uc:...}}... ; {{#if:...}} and the like vanish."""
    function, _, first = raw_name.partition(":")
    function = function.strip().lower()
    if function not in ("formatnum", "lc", "uc", "lcfirst", "ucfirst"):
        return ""
    first_text = _WS.sub(" ", renderer.inline(mwparserfromhell.parse(first))).strip()
    if function == "formatnum":
        args = _Args(renderer, node)
        if args.get(1).upper() in ("R", "NOSEP"):
            return first_text.replace(",", "")
        return _group_digits(first_text)
    if function == "lc":
        return first_text.lower()
    if function == "uc":
        return first_text.upper()
    if function == "lcfirst":
        return first_text[:1].lower() + first_text[1:]
    if function == "ucfirst":
        return first_text[:1].upper() + first_text[1:]
    return ""


# --------------------------------------------------------------------------------------
# Template registry
# --------------------------------------------------------------------------------------


def _constant(text: str) -> TemplateRenderer:
    return lambda args: text


def _last_param(args: _Args) -> str:
    values = args.nonempty_positional()
    return values[-1] if values else ""


for _names, _text in (
    (("ndash", "en dash", "endash", "–"), "–"),
    (("mdash", "em dash", "emdash", "—"), "—"),
    (("snd", "spnd", "sndash", "spaced ndash", "spaced en dash", "spaced endash"), " – "),
    (("spaced mdash", "spaced em dash", "smdash"), " — "),
    (("nbsp", "sp", "space", "ensp", "emsp", "thinsp", "thin space", "nnbsp"), " "),
    (("zwsp", "shy", "hair space", "wbr", "zwj", "zwnj"), ""),
    (("'",), "'"),
    (("'s",), "'s"),
    (('"',), '"'),
    (("=",), "="),
    (("!",), "|"),
    (("nbhyph",), "-"),
    (("·", "dot", "middot"), " · "),
    (("•", "bull", "bullet"), " • "),
    (("co2",), "CO2"),
    (("h2o",), "H2O"),
    (("ch4",), "CH4"),
):
    _template(*_names)(_constant(_text))

# Formatting wrappers: the text they wrap is prose.
_template(
    "nowrap",
    "nobr",
    "no wrap",
    "nobreak",
    "small",
    "smaller",
    "big",
    "larger",
    "large",
    "em",
    "strong",
    "nobold",
    "noitalic",
    "mvar",
    "math",
    "bigmath",
    "var",
    "abbr",
    "abbrlink",
    "tooltip",
    "sc",
    "smallcaps",
    "small caps",
    "sc1",
    "code",
    "kbd",
    "samp",
    "not a typo",
    "proper name",
    "visible anchor",
    "pending film",
    "grey",
    "gray",
    "sup",
    "sub",
    "nihongo",
    "nihongo2",
    "citation needed span",
    "cn span",
    "clarify span",
    "dubious span",
    "vague span",
    "when span",
    "who span",
    "lower",
    "upper",
    "dfn",
    "chem2",
    "f1",
    "flag",
    "flagcountry",
    "flagu",
    "flagathlete",
    "flag country",
    "uline",
    "underline",
    "mono",
)(lambda args: args.get("text") or args.get(1))
_template("ill", "interlanguage link", "interlanguage link multi", "ill2", "illm")(
    lambda args: args.get("lt") or args.get(1)
)
_template("lang", "langx", "wikt-lang", "script")(lambda args: args.get("text") or args.get(2))
_template("transl", "transliteration", "resize", "font size", "ilink")(_last_param)
_template("color", "colour", "font color", "fontcolor", "colored text")(
    lambda args: args.get("text") or _last_param(args)
)
_template("linktext", "gaps", "chem")(lambda args: "".join(args.positional()))
_template("sortname")(lambda args: f"{args.get(1)} {args.get(2)}".strip())
_template("sort", "sorted")(lambda args: args.get(2) or args.get(1))
_template("nts", "ntsh", "nts0", "sort number")(lambda args: _group_digits(args.get(1)))
_template("10^")(lambda args: "10^" + args.get(1) if args.get(1) else "10")
_template("e")(lambda args: "×10^" + args.get(1) if args.get(1) else "")
_template("isbn")(lambda args: "ISBN " + args.get(1) if args.get(1) else "")
_template("blockquote", "quote", "poem quote", "bquote", block=True)(
    lambda args: args.get("text") or args.get("quote") or args.get(1)
)


@_template("sic")
def _render_sic(args: _Args) -> str:
    text = "".join(args.positional())
    hidden = args.flag("hide") or args.get(1) == "?" or args.has("nolink")
    return text if hidden or not text else f"{text} [sic]"


@_template("slink", "section link")
def _render_section_link(args: _Args) -> str:
    values = args.nonempty_positional()
    if not values:
        return ""
    page, _, section = values[0].partition("#")
    sections = [section] if section else []
    sections += values[1:]
    return " § ".join([page.replace("_", " ")] + [s.replace("_", " ") for s in sections])


@_template("frac", "sfrac", "fraction", "fract")
def _render_fraction(args: _Args) -> str:
    values = args.positional()
    if len(values) >= 3:
        return f"{values[0]} {values[1]}/{values[2]}"
    if len(values) == 2:
        return f"{values[0]}/{values[1]}"
    return f"1/{values[0]}" if values else ""


@_template("ordinal")
def _render_ordinal(args: _Args) -> str:
    number = args.get(1)
    return number + _ordinal_suffix(number) if number else ""


@_template("circa", "c.", "ca.")
def _render_circa(args: _Args) -> str:
    values = args.nonempty_positional()
    if not values:
        return "c."
    return " – ".join(f"c. {v}" for v in values[:2])


@_template("floruit", "fl.", "fl")
def _render_floruit(args: _Args) -> str:
    values = args.nonempty_positional()
    return "fl. " + "–".join(values[:2]) if values else "fl."


@_template("reign", "r.")
def _render_reign(args: _Args) -> str:
    values = args.nonempty_positional()
    return "r. " + "–".join(values[:2]) if values else "r."


@_template("round")
def _render_round(args: _Args) -> str:
    value, digits = args.get(1), args.get(2, "0")
    try:
        return f"{round(float(value), int(digits)):.{max(int(digits), 0)}f}"
    except ValueError:
        return value


# --- currency --------------------------------------------------------------------------

_CURRENCY_SYMBOLS = {
    "usd": "US$",
    "us$": "US$",
    "us dollar": "US$",
    "eur": "€",
    "€": "€",
    "euro": "€",
    "gbp": "£",
    "£": "£",
    "jpy": "¥",
    "¥": "¥",
    "yen": "¥",
    "inr": "₹",
    "₹": "₹",
    "cny": "CN¥",
    "rmb": "CN¥",
    "cad": "CA$",
    "aud": "A$",
    "nzd": "NZ$",
    "hkd": "HK$",
    "sgd": "S$",
    "chf": "CHF ",
    "krw": "₩",
    "rub": "₽",
    "brl": "R$",
    "mxn": "Mex$",
    "sek": "kr ",
    "nok": "kr ",
    "dkk": "kr ",
    "zar": "R ",
    "try": "₺",
}


def _money(symbol: str, amount: str) -> str:
    amount = amount.strip()
    if not amount:
        return ""
    return symbol + _group_digits(amount)


def _currency_template(symbol: str) -> TemplateRenderer:
    return lambda args: _money(symbol, args.get("amount") or args.get(1))


# {{US$|5 million}}, {{USD|...}}, {{GBP|...}}, {{£|...}}, {{€|...}}, {{INR|...}}...
for _code, _symbol in _CURRENCY_SYMBOLS.items():
    if _code not in ("try", "sek", "nok", "dkk", "zar", "mxn", "yen"):
        _template(_code)(_currency_template(_symbol))


@_template("currency")
def _render_currency(args: _Args) -> str:
    amount = args.get("amount") or args.get(1)
    code = (args.get("code") or args.get("type") or args.get(2) or "USD").lower()
    return _money(_CURRENCY_SYMBOLS.get(code, code.upper() + " "), amount)


@_template("dollarsign", "dollar sign")
def _render_dollarsign(args: _Args) -> str:
    country = args.get(1).upper()
    return {"": "$", "US": "US$", "CA": "CA$", "AU": "A$", "NZ": "NZ$", "HK": "HK$"}.get(
        country, country + "$"
    )


@_template("format price", "formatprice")
def _render_format_price(args: _Args) -> str:
    """Large amounts in words with up to 3 decimals ("8.858 billion"), as the template does."""
    raw = args.get(1).replace(",", "")
    try:
        value = float(raw)
    except ValueError:
        return args.get(1)
    digits = int(args.get(2)) if args.get(2).isdigit() else 3
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if abs(value) >= scale:
            number = f"{value / scale:.{digits}f}".rstrip("0").rstrip(".")
            return f"{number} {word}"
    return f"{value:,.{digits}f}".rstrip("0").rstrip(".")


@_template("inflation", "inflation-fn")
def _render_inflation(args: _Args) -> str:
    # The computed value changes whenever the index is updated; keep the stated original.
    return args.get(2)


# --- dates ------------------------------------------------------------------------------


def _dmy(args: _Args) -> bool:
    if args.flag("df"):
        return True
    return args.get("format").lower() == "dmy"


def _date_template(first: int = 1) -> TemplateRenderer:
    """Render the date starting at positional ``first``; the age part is never rendered."""

    def render(args: _Args) -> str:
        values = args.positional()[first - 1 :]
        parsed = _parse_date_args(values)
        if parsed is None:
            return values[0].strip() if values else ""
        return _format_date(*parsed, dmy=_dmy(args))

    return render


_template(
    "birth date",
    "birth date and age",
    "bda",
    "dob",
    "birthdate and age",
    "birth-date and age",
    "birth date and age2",
    "death date",
    "death date and age",
    "dda",
    "start date",
    "end date",
    "start date and age",
    "end date and age",
    "start and end dates",
    "film date",
    "release date",
    "release date and age",
    "date and age",
    "birth year and age",
    "death year and age",
    "dts",
    "date table sorting",
    "sort date",
)(_date_template())


@_template("date")
def _render_date(args: _Args) -> str:
    value = args.get(1)
    iso = _ISO_DATE.fullmatch(value)
    if not iso:
        return value
    style = args.get(2).lower()
    if style == "iso":
        return value
    return _format_date(iso.group(1), iso.group(2), iso.group(3) or "", dmy=style == "dmy")


@_template("birth based on age as of date", "birth based on age at date")
def _render_birth_from_age(args: _Args) -> str:
    age, year, month, day = (args.get(i) for i in range(1, 5))
    if not (age.isdigit() and year.isdigit()):
        return ""
    latest = int(year) - int(age)
    # The birthday range spans two calendar years unless the reference date is December 31.
    if _month_number(month) == 12 and day.lstrip("0") == "31":
        return str(latest)
    return f"{latest - 1} or {latest}"


@_template("as of", "asof", "as at", "as of date")
def _render_as_of(args: _Args) -> str:
    if args.get("alt"):
        text = args.get("alt")
    else:
        year, month, day = args.get(1), args.get(2), args.get(3)
        dmy = args.get("df").lower() not in ("us", "mdy")  # this template defaults to dmy
        lead = "since" if args.flag("since") else "as of"
        if args.get("pre"):
            lead = f"{lead} {args.get('pre')}"
        text = f"{lead} {_format_date(year, month, day, dmy=dmy)}".strip()
        if not args.flag("lc"):
            text = text[:1].upper() + text[1:]
    return text + args.get("post")


_template("age", "age in years", "age in years and days", "age in years, months and days")(
    _constant("")
)
_template("years ago", "time ago", "age in days", "currentyear")(_constant(""))


# --- quantities -------------------------------------------------------------------------

# code -> (symbol, singular name, plural name)
_UNITS: dict[str, tuple[str, str, str]] = {
    "m": ("m", "metre", "metres"),
    "km": ("km", "kilometre", "kilometres"),
    "cm": ("cm", "centimetre", "centimetres"),
    "mm": ("mm", "millimetre", "millimetres"),
    "um": ("μm", "micrometre", "micrometres"),
    "nm": ("nm", "nanometre", "nanometres"),
    "mi": ("mi", "mile", "miles"),
    "miles": ("mi", "mile", "miles"),
    "ft": ("ft", "foot", "feet"),
    "feet": ("ft", "foot", "feet"),
    "in": ("in", "inch", "inches"),
    "yd": ("yd", "yard", "yards"),
    "nmi": ("nmi", "nautical mile", "nautical miles"),
    "ly": ("ly", "light-year", "light-years"),
    "pc": ("pc", "parsec", "parsecs"),
    "au": ("AU", "astronomical unit", "astronomical units"),
    "km2": ("km2", "square kilometre", "square kilometres"),
    "m2": ("m2", "square metre", "square metres"),
    "cm2": ("cm2", "square centimetre", "square centimetres"),
    "sqmi": ("sq mi", "square mile", "square miles"),
    "mi2": ("sq mi", "square mile", "square miles"),
    "sqft": ("sq ft", "square foot", "square feet"),
    "ft2": ("sq ft", "square foot", "square feet"),
    "acre": ("acres", "acre", "acres"),
    "ha": ("ha", "hectare", "hectares"),
    "kg": ("kg", "kilogram", "kilograms"),
    "g": ("g", "gram", "grams"),
    "mg": ("mg", "milligram", "milligrams"),
    "t": ("t", "tonne", "tonnes"),
    "lb": ("lb", "pound", "pounds"),
    "oz": ("oz", "ounce", "ounces"),
    "st": ("st", "stone", "stone"),
    "shortton": ("short tons", "short ton", "short tons"),
    "longton": ("long tons", "long ton", "long tons"),
    "l": ("L", "litre", "litres"),
    "ml": ("mL", "millilitre", "millilitres"),
    "cuft": ("cu ft", "cubic foot", "cubic feet"),
    "ft3": ("cu ft", "cubic foot", "cubic feet"),
    "m3": ("m3", "cubic metre", "cubic metres"),
    "usgal": ("US gal", "US gallon", "US gallons"),
    "impgal": ("imp gal", "imperial gallon", "imperial gallons"),
    "mph": ("mph", "mile per hour", "miles per hour"),
    "km/h": ("km/h", "kilometre per hour", "kilometres per hour"),
    "kph": ("km/h", "kilometre per hour", "kilometres per hour"),
    "m/s": ("m/s", "metre per second", "metres per second"),
    "kn": ("kn", "knot", "knots"),
    "hp": ("hp", "horsepower", "horsepower"),
    "bhp": ("bhp", "brake horsepower", "brake horsepower"),
    "ps": ("PS", "metric horsepower", "metric horsepower"),
    "w": ("W", "watt", "watts"),
    "kw": ("kW", "kilowatt", "kilowatts"),
    "mw": ("MW", "megawatt", "megawatts"),
    "gw": ("GW", "gigawatt", "gigawatts"),
    "kwh": ("kWh", "kilowatt-hour", "kilowatt-hours"),
    "mwh": ("MWh", "megawatt-hour", "megawatt-hours"),
    "gwh": ("GWh", "gigawatt-hour", "gigawatt-hours"),
    "twh": ("TWh", "terawatt-hour", "terawatt-hours"),
    "j": ("J", "joule", "joules"),
    "lbft": ("lbf⋅ft", "pound-foot", "pound-feet"),
    "lb.ft": ("lbf⋅ft", "pound-foot", "pound-feet"),
    "lbf.ft": ("lbf⋅ft", "pound-foot", "pound-feet"),
    "nm torque": ("N⋅m", "newton-metre", "newton-metres"),
    "n.m": ("N⋅m", "newton-metre", "newton-metres"),
    "c": ("°C", "degree Celsius", "degrees Celsius"),
    "f": ("°F", "degree Fahrenheit", "degrees Fahrenheit"),
    "k": ("K", "kelvin", "kelvins"),
    "oilbbl": ("bbl", "barrel", "barrels"),
    "bbl": ("bbl", "barrel", "barrels"),
    "oilbbl/d": ("bbl/d", "barrel per day", "barrels per day"),
    "ghz": ("GHz", "gigahertz", "gigahertz"),
    "mhz": ("MHz", "megahertz", "megahertz"),
}
_UNIT_SCALES = {"e3": "thousand", "e6": "million", "e9": "billion", "e12": "trillion"}
_MULTIPLIER_PREFIX = {"k": "thousand", "m": "million", "g": "billion"}
_RANGE_WORDS = {
    "-": "–",
    "–": "–",
    "to": " to ",
    "to(-)": " to ",
    "and": " and ",
    "and(-)": " and ",
    "or": " or ",
    "x": " × ",
    "×": " × ",
    "by": " by ",
    "+": " + ",
    "+/-": " ± ",
    "±": " ± ",
    ", and": ", and ",
    ", or": ", or ",
}
_COMPOUND_UNITS = {("ft", "in"), ("lb", "oz"), ("st", "lb"), ("mi", "yd")}


def _unit_forms(code: str) -> tuple[str, str, str]:
    """(symbol, singular, plural) of a convert unit code; unknown codes show as themselves."""
    key = code.strip().lower()
    if key in _UNITS:
        return _UNITS[key]
    if code.strip().endswith(("bbl/d", "bbl")) and code[:1] in ("k", "M", "G"):
        # Moilbbl/d: million barrels (of oil) per day
        base = _UNITS["oilbbl/d" if code.endswith("/d") else "oilbbl"]
        scale = _MULTIPLIER_PREFIX[code[0].lower()]
        return (f"{scale} {base[2]}", f"{scale} {base[1]}", f"{scale} {base[2]}")
    for prefix, scale in _UNIT_SCALES.items():
        if key.startswith(prefix) and key[len(prefix) :] in _UNITS:
            base = _UNITS[key[len(prefix) :]]
            return (f"{scale} {base[2]}", f"{scale} {base[1]}", f"{scale} {base[2]}")
    return (code.strip(), code.strip(), code.strip())


_CONVERT_NUMBER = re.compile(r"[-−+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?|[\d,]+\+\d+/\d+")


def _is_number(text: str) -> bool:
    return bool(_CONVERT_NUMBER.fullmatch(text.strip()))


@_template("convert", "cvt", "convert2")
def _render_convert(args: _Args) -> str:
    """Input value(s) and unit only: the converted value is arithmetic, not article text."""
    values = [v.strip() for v in args.positional()]
    if not values or not values[0]:
        return ""
    abbr = args.get("abbr").lower()
    spell = args.get("spell").lower() in ("in", "on")
    adjective = args.flag("adj")
    names = abbr in ("off", "out") or spell or (adjective and abbr not in ("on", "in"))
    numbers = [_spell_number(values[0]) if spell else _group_digits(values[0])]
    i = 1
    while i + 1 < len(values) and values[i].lower() in _RANGE_WORDS:
        numbers.append(_RANGE_WORDS[values[i].lower()])
        numbers.append(_group_digits(values[i + 1]))
        i += 2
    quantity = "".join(numbers).replace("+", " ") if "/" in values[0] else "".join(numbers)
    if i >= len(values) or not values[i]:
        return quantity
    unit = values[i]
    symbol, singular, plural = _unit_forms(unit)
    single = len(numbers) == 1 and values[0] in ("1", "1.0")
    if adjective and names:
        text = f"{quantity}-{singular.replace(' ', '-')}"
    elif names:
        text = f"{quantity} {singular if single else plural}"
    else:
        text = f"{quantity} {symbol}"
    # 6|ft|2|in: a second value and unit of the same quantity.
    if i + 2 < len(values) and _is_number(values[i + 1]):
        second_unit = values[i + 2].lower()
        if (unit.lower(), second_unit) in _COMPOUND_UNITS:
            s_symbol, s_singular, s_plural = _unit_forms(second_unit)
            second = s_plural if names else s_symbol
            text += f" {values[i + 1]} {second}"
    return text


@_template("val")
def _render_val(args: _Args) -> str:
    number = args.get(1)
    if not number and not args.get("e"):
        return ""
    number = _group_digits(number) if len(number.split(".")[0].lstrip("-−")) > 4 else number
    text = args.get("p") + number
    if args.get(2) and args.get(3):
        text += f"+{args.get(2).lstrip('+')}−{args.get(3).lstrip('-−')}"
    elif args.get(2):
        text += f"±{args.get(2)}"
    if args.get("e"):
        text += f"×10^{args.get('e')}" if number else f"10^{args.get('e')}"
    text += args.get("end")
    unit = args.get("u") or args.get("ul")
    per = args.get("up") or args.get("upl")
    if unit:
        text += f" {unit}"
    if per:
        text += f"/{per}"
    return text + args.get("s")


_PARTICLES = {
    "proton": "p",
    "antiproton": "p̄",
    "neutron": "n",
    "antineutron": "n̄",
    "electron": "e−",
    "positron": "e+",
    "muon": "μ−",
    "antimuon": "μ+",
    "photon": "γ",
    "neutrino": "ν",
    "antineutrino": "ν̄",
    "up quark": "u",
    "down quark": "d",
    "strange quark": "s",
    "charm quark": "c",
    "bottom quark": "b",
    "top quark": "t",
    "up antiquark": "ū",
    "down antiquark": "d̄",
    "strange antiquark": "s̄",
    "charm antiquark": "c̄",
    "bottom antiquark": "b̄",
    "top antiquark": "t̄",
    "higgs boson": "H0",
    "w boson": "W",
    "z boson": "Z0",
    "gluon": "g",
    "pion": "π",
    "kaon": "K",
    "alpha particle": "α",
}


@_template("subatomic particle", "sp particle")
def _render_particle(args: _Args) -> str:
    name = args.get(1)
    return _PARTICLES.get(name.lower(), name)


_ELEMENTS = {
    "hydrogen": "H",
    "deuterium": "D",
    "helium": "He",
    "lithium": "Li",
    "beryllium": "Be",
    "boron": "B",
    "carbon": "C",
    "nitrogen": "N",
    "oxygen": "O",
    "iron": "Fe",
    "uranium": "U",
    "plutonium": "Pu",
    "thorium": "Th",
    "radium": "Ra",
    "cobalt": "Co",
    "iodine": "I",
    "caesium": "Cs",
    "cesium": "Cs",
    "strontium": "Sr",
    "potassium": "K",
}


@_template("simplenuclide", "simple nuclide", "nuclide", "sup nuclide")
def _render_nuclide(args: _Args) -> str:
    element, mass = args.get(1), args.get(2)
    symbol = _ELEMENTS.get(element.lower(), element)
    if args.flag("anti"):
        symbol = "".join(ch + "\u0305" for ch in symbol)  # overbar marks the antinucleus
    return f"{mass}{symbol}"


_ORBITERS = {
    "099": "Challenger",
    "101": "Enterprise",
    "102": "Columbia",
    "103": "Discovery",
    "104": "Atlantis",
    "105": "Endeavour",
}


def _coord_part(values: list[str], positive: str, negative: str) -> str:
    """One of latitude/longitude: decimal ("38.9°N") or degrees/minutes/seconds."""
    hemisphere = values[-1].upper() if values[-1].upper() in (positive, negative) else ""
    numbers = values[:-1] if hemisphere else values
    if not hemisphere:
        value = numbers[0]
        hemisphere = negative if value.startswith(("-", "−")) else positive
        return f"{value.lstrip('-−')}°{hemisphere}"
    marks = ("°", "′", "″")
    return "".join(f"{n}{m}" for n, m in zip(numbers, marks, strict=False)) + hemisphere


@_template("coord", "coor", "coor d", "coor dm", "coor dms")
def _render_coord(args: _Args) -> str:
    """Coordinates shown in the text; those displayed only at the page title render nothing."""
    display = args.get("display", "inline").replace(" ", "").lower()
    if display in ("title", "t"):
        return ""
    values = [v for v in args.positional() if v and ":" not in v and "=" not in v]
    for split in range(1, len(values)):
        if values[split - 1].upper() in ("N", "S"):
            lat, lon = values[:split], values[split:]
            break
    else:
        if len(values) < 2:
            return ""
        lat, lon = values[:1], values[1:2]
    if not lon:
        return ""
    return f"{_coord_part(lat, 'N', 'S')} {_coord_part(lon[:4], 'E', 'W')}"


@_template("ov")
def _render_orbiter(args: _Args) -> str:
    name = _ORBITERS.get(args.get(1).zfill(3))
    return f"Space Shuttle {name}" if name else f"OV-{args.get(1)}"


@_template("f1 gp", "f1gp")
def _render_f1_gp(args: _Args) -> str:
    year, race = args.get(1), args.get(2)
    if args.get(3):
        return args.get(3)
    return " ".join(p for p in (year, f"{race} Grand Prix" if race else "") if p)


# Every registered template name (normalised), e.g. for documentation and tests.
TEMPLATE_NAMES: frozenset[str] = frozenset(_REGISTRY)
