"""Wikitext -> prose paragraphs (mwparserfromhell).

The renderer walks the parse tree once and writes plain text. Unlike extractors that drop
every template, it renders the inline templates that carry facts (``{{convert}}``, dates,
currencies, ``{{as of}}``, ``{{val}}``...) through the registry in
:mod:`pipeline.text.templates`, because a sentence that lost its number is later
mislabeled as "changed" or "unchanged" for the wrong reason. Unknown templates are dropped;
the cleanup step then removes the empty parentheses and stray separators they leave behind
(:func:`template_artifacts` measures what is left). ``<math>`` shows its LaTeX made readable.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Sequence

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from pipeline.records import Paragraph
from pipeline.text.templates import PLAIN_NUMBER, render_template_node

__all__ = ["render_template", "template_artifacts", "wikitext_to_paragraphs"]

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------
# Sections and tags
# --------------------------------------------------------------------------------------

# Sections whose whole content (with their subsections) is apparatus, not article prose.
_EXCLUDED_SECTION_WORDS = frozenset(
    {
        "references",
        "reference",
        "notes",
        "note",
        "see also",
        "external links",
        "external link",
        "further reading",
        "bibliography",
        "sources",
        "citations",
        "footnotes",
        "explanatory notes",
        "works cited",
        "cited works",
        "general references",
        "general bibliography",
        "primary sources",
        "secondary sources",
        "selected bibliography",
    }
)
_SECTION_JOINERS = re.compile(r"\s*(?:,|&|\band\b)\s*")

# Tags whose content is never prose (or is prose of another page, e.g. gallery captions).
_DROP_TAGS = frozenset(
    {
        "ref",
        "references",
        "gallery",
        "timeline",
        "graph",
        "mapframe",
        "maplink",
        "imagemap",
        "score",
        "syntaxhighlight",
        "source",
        "pre",
        "templatedata",
        "templatestyles",
        "inputbox",
        "categorytree",
        "includeonly",
        "indicator",
        "charinsert",
        "hiero",
        "rt",
        "rp",
        "style",
        "script",
    }
)
# Block-level tags dropped whole; they separate the paragraphs around them.
_BLOCK_DROP_TAGS = frozenset({"table", "ul", "ol", "dl", "li", "dt", "dd", "gallery", "pre"})
# Block-level tags whose text is kept as a paragraph of its own.
_BLOCK_KEEP_TAGS = frozenset({"div", "p", "blockquote", "center", "poem", "h1", "h2", "h3"})
_LIST_MARKUP = frozenset({"*", "#", ";", ":"})

_DROP_NAMESPACES = frozenset({"file", "image", "category", "media"})
# Interlanguage links ([[de:Foo]]) have a language code as prefix.
_INTERLANG = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]+){0,2}|simple")

# --------------------------------------------------------------------------------------
# Text cleanup
# --------------------------------------------------------------------------------------

_WS = re.compile(r"\s+")
_QUOTES = re.compile(r"'{2,}")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v\xa0]*\n")
# Empty brackets left by dropped templates: "()", "( )", "(, )", "(; ;)", "( or )".
_EMPTY_BRACKETS = re.compile(r"\((?:\s*(?:[,;:]|(?:aged?|or|and)\b))*\s*\)|\[\s*(?:[,;:]\s*)*\]")
# "( ; born 1985)" -> "(born 1985)": a dropped pronunciation left its separator.
_OPEN_SEP = re.compile(r"\(\s*[,;:][\s,;:]*|\(\s+")
_CLOSE_SEP = re.compile(r"[\s,;:]*[,;:]\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"(\w*)\s+(?:([.,;:!?])(?!\w)|(\)))")
# Words that need an object. "of {{x}}." -> "of ." stays visible to template_artifacts: the
# gap is a lost fact (a template to render), not debris to tidy away.
_DANGLING_WORDS = frozenset(
    [
        "of",
        "in",
        "from",
        "at",
        "by",
        "with",
        "to",
        "for",
        "on",
        "into",
        "onto",
        "as",
        "than",
        "between",
        "about",
        "around",
        "over",
        "under",
        "approximately",
        "nearly",
        "roughly",
        "the",
        "a",
        "an",
        "and",
        "or",
        "was",
        "were",
        "is",
        "are",
        "until",
        "since",
    ]
)


def _tidy_space_before_punct(match: re.Match[str]) -> str:
    word = match.group(1)
    if word.lower() in _DANGLING_WORDS:
        return match.group(0)
    return word + (match.group(2) or match.group(3))


_COMMA_BEFORE_STOP = re.compile(r"[,;:]+(?=\.(?!\.))")
_REPEATED_COMMA = re.compile(r",(?:\s*,)+")
# Lines of a table the parser could not recognise (unbalanced markup).
_TABLE_LINE = re.compile(r"^\s*(?:\{\||\|\}|\|-|\||!)")

# Comments and references are removed before parsing: they are dropped anyway and make up
# about half of the nodes, so the parse gets twice as fast.
_PRE_STRIP = re.compile(
    r"<!--.*?(?:-->|\Z)"
    r"|<ref\b[^>]*?/\s*>"
    r"|<ref\b[^>]*>.*?</ref\s*>"
    r"|<references\b[^>]*?/\s*>"
    r"|<references\b[^>]*>.*?</references\s*>",
    re.S | re.I,
)
# Table edges at the start of a line ("{|" opens, "|}" closes; tables nest).
_TABLE_EDGE = re.compile(r"^[ \t]*(\{\||\|\})", re.M)
_HEADING_LINE = re.compile(r"^(={1,6})[ \t]*(.+?)[ \t]*\1[ \t]*$", re.M)
_ROUGH_MARKUP = re.compile(r"\{\{.*?\}\}|<[^>]*>|'{2,}|\[\[|\]\]")


def _is_excluded_title(title: str) -> bool:
    """True for References / See also / External links ... (and "Notes and references")."""
    key = " ".join(title.lower().split()).strip(" :.")
    if key in _EXCLUDED_SECTION_WORDS:
        return True
    parts = [p for p in _SECTION_JOINERS.split(key) if p]
    return bool(parts) and all(p in _EXCLUDED_SECTION_WORDS for p in parts)


def _cut_excluded_sections(text: str) -> str:
    """Remove excluded sections on the raw text so they are never parsed (speed only)."""
    pieces: list[str] = []
    keep_from = 0
    skip_level = 0
    for match in _HEADING_LINE.finditer(text):
        level = len(match.group(1))
        if skip_level and level > skip_level:
            continue
        title = _ROUGH_MARKUP.sub("", match.group(2))
        if skip_level:
            keep_from = match.start()
            skip_level = 0
        if _is_excluded_title(title):
            pieces.append(text[keep_from : match.start()])
            skip_level = level
    if not skip_level:
        pieces.append(text[keep_from:])
    return "".join(pieces)


def _strip_tables(text: str) -> str:
    """Remove wikitables before parsing: they are dropped anyway and cost 2/3 of the parse.

    Whatever follows the closing "|}" on its line stays (it may close a template); a table
    that is never closed is left to the parser rather than eating the rest of the page.
    """
    pieces: list[str] = []
    depth = 0
    keep_from = 0
    start = 0
    for match in _TABLE_EDGE.finditer(text):
        if match.group(1) == "{|":
            if depth == 0:
                start = match.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                pieces.append(text[keep_from:start])
                pieces.append("\n\n")
                keep_from = match.end()
    if not pieces:
        return text
    pieces.append(text[keep_from:])
    return "".join(pieces)


def _parse(text: str) -> Wikicode:
    # Style tags are parsed, not skipped for speed: only the parser tells the closing quotes
    # of an italic title from the apostrophe of a following "'s".
    return mwparserfromhell.parse(text)


def _clean_inline(text: str) -> str:
    """Collapse whitespace and remove the punctuation debris of dropped templates."""
    text = _WS.sub(" ", text)
    if "__" in text:
        text = _MAGIC_WORD.sub("", text)
    if "(" in text or "[" in text:
        text = _EMPTY_BRACKETS.sub("", text)
        text = _OPEN_SEP.sub("(", text)
        text = _CLOSE_SEP.sub(")", text)
    text = _SPACE_BEFORE_PUNCT.sub(_tidy_space_before_punct, text)
    text = _COMMA_BEFORE_STOP.sub("", text)
    text = _REPEATED_COMMA.sub(",", text)
    return _WS.sub(" ", text).strip()


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _paragraph_texts(rendered: str) -> list[str]:
    """Split rendered section text into clean paragraphs (blank lines separate them)."""
    result: list[str] = []
    for block in _BLANK_LINE.split(rendered):
        if not block or block.isspace():
            continue
        lines = [ln for ln in block.split("\n") if not _TABLE_LINE.match(ln)]
        text = _clean_inline(" ".join(lines))
        if _has_words(text):
            result.append(text)
    return result


# --------------------------------------------------------------------------------------
# LaTeX (<math>) rendered simply: the source with common commands as Unicode
# --------------------------------------------------------------------------------------

_LATEX_SYMBOLS = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "zeta": "ζ",
    "eta": "η",
    "theta": "θ",
    "iota": "ι",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Xi": "Ξ",
    "Pi": "Π",
    "Sigma": "Σ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
    "cdot": "⋅",
    "times": "×",
    "pm": "±",
    "mp": "∓",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "neq": "≠",
    "ne": "≠",
    "approx": "≈",
    "sim": "~",
    "simeq": "≃",
    "equiv": "≡",
    "propto": "∝",
    "infty": "∞",
    "to": "→",
    "rightarrow": "→",
    "leftarrow": "←",
    "sum": "∑",
    "prod": "∏",
    "int": "∫",
    "partial": "∂",
    "nabla": "∇",
    "in": "∈",
    "ldots": "…",
    "cdots": "⋯",
    "dots": "…",
    "hbar": "ħ",
    "langle": "⟨",
    "rangle": "⟩",
    "lvert": "|",
    "rvert": "|",
    "vert": "|",
    "ell": "ℓ",
}
_LATEX_UNWRAP = re.compile(
    r"\\(?:mathrm|mathbf|mathit|mathcal|mathbb|mathsf|boldsymbol|text|textrm|textit|textbf"
    r"|operatorname|mbox|rm|bf|underbrace|overbrace|underset|overset)\s*\{([^{}]*)\}"
)
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*(?:\{([^{}]*)\}|(\w))\s*(?:\{([^{}]*)\}|(\w))")
_LATEX_SQRT = re.compile(r"\\sqrt\s*(?:\{([^{}]*)\}|(\w))")
_LATEX_ACCENT = re.compile(
    r"\\(bar|overline|tilde|widetilde|hat|widehat|vec|dot)\s*(?:\{([^{}]*)\}|(\S))"
)
_LATEX_ACCENTS = {
    "bar": "\u0304",
    "overline": "\u0305",
    "tilde": "\u0303",
    "widetilde": "\u0303",
    "hat": "\u0302",
    "widehat": "\u0302",
    "vec": "\u20d7",
    "dot": "\u0307",
}
_LATEX_SCRIPT = re.compile(r"([_^])\s*\{([^{}]*)\}")
_LATEX_SPACING = re.compile(
    r"\\[,;:! ]|\\q?quad\b|\\(?:left|right|big|Big|bigg|Bigg)\b\.?|\\(?:displaystyle|limits"
    r"|nolimits|mathop)\b|\\(?:begin|end)\s*\{[^{}]*\}|\\\\|&"
)
_LATEX_COMMAND = re.compile(r"\\([A-Za-z]+)")


def _latex_group(text: str) -> str:
    """A fraction part or script: bare when one token, in parentheses otherwise."""
    text = text.strip()
    return text if len(text) <= 1 or text.isalnum() else f"({text})"


def _latex_accent(match: re.Match[str]) -> str:
    body = match.group(2) if match.group(2) is not None else match.group(3)
    mark = _LATEX_ACCENTS[match.group(1)]
    return "".join(ch + mark if not ch.isspace() else ch for ch in body)


def _render_latex(source: str) -> str:
    """LaTeX source made readable: Greek and operators as Unicode, fractions as a/b."""
    text = source.replace(r"\{", "\x01").replace(r"\}", "\x02").replace(r"\|", "‖")
    text = text.replace("''", "″")  # a double prime, not wiki italics
    text = _LATEX_SPACING.sub(" ", text)
    text = _LATEX_COMMAND.sub(lambda m: _LATEX_SYMBOLS.get(m.group(1), m.group(0)), text)
    for _ in range(8):  # innermost groups first; nesting deeper than this is left flat
        before = text
        text = _LATEX_UNWRAP.sub(r"\1", text)
        text = _LATEX_ACCENT.sub(_latex_accent, text)
        text = _LATEX_FRAC.sub(
            lambda m: (
                _latex_group(m.group(1) if m.group(1) is not None else m.group(2))
                + "/"
                + _latex_group(m.group(3) if m.group(3) is not None else m.group(4))
            ),
            text,
        )
        text = _LATEX_SQRT.sub(
            lambda m: "√" + _latex_group(m.group(1) if m.group(1) is not None else m.group(2)),
            text,
        )
        text = _LATEX_SCRIPT.sub(lambda m: m.group(1) + _latex_group(m.group(2)), text)
        if text == before:
            break
    text = text.replace("{", "").replace("}", "")
    text = _LATEX_COMMAND.sub(r"\1", text)  # \ln, \exp, \max... read fine without the slash
    text = text.replace("\x01", "{").replace("\x02", "}")
    return _WS.sub(" ", text).strip()


# --------------------------------------------------------------------------------------
# The renderer
# --------------------------------------------------------------------------------------


class _Renderer:
    """Walks mwparserfromhell nodes and appends plain text to a list of strings."""

    def inline(self, code: Wikicode) -> str:
        """Render a piece of wikicode (a template argument, a link label) to a string."""
        out: list[str] = []
        self.render(code.nodes, out)
        return "".join(out)

    def render(self, nodes: Sequence[Node], out: list[str]) -> None:
        """Append the text of ``nodes``; list items and indented lines are skipped whole."""
        skip_line = False
        for node in nodes:
            kind = type(node)
            if kind is Text:
                text = node.value
                if skip_line:
                    cut = text.find("\n")
                    if cut < 0:
                        continue
                    skip_line = False
                    text = text[cut + 1 :]  # the break before the list was already emitted
                if "''" in text:
                    text = _QUOTES.sub("", text)
                out.append(text)
            elif skip_line or kind is Comment:
                continue
            elif kind is Template:
                out.append(self.template(node))
            elif kind is Wikilink:
                self.wikilink(node, out)
            elif kind is Tag:
                if node.wiki_markup in _LIST_MARKUP:
                    out.append("\n\n")
                    skip_line = True
                else:
                    self.tag(node, out)
            elif kind is HTMLEntity:
                out.append(node.normalize())
            elif kind is ExternalLink:
                if not node.brackets:
                    out.append(str(node.url))
                elif node.title is not None:
                    self.render(node.title.nodes, out)
            elif kind is Heading:
                out.append("\n\n")  # a heading nested in a tag: only a paragraph break
            elif kind is Argument and node.default is not None:
                self.render(node.default.nodes, out)

    def wikilink(self, node: Wikilink, out: list[str]) -> None:
        """[[A|B]] -> B, [[A]] -> A; files, categories and interlanguage links vanish."""
        title = str(node.title).strip()
        colon = title.startswith(":")
        if colon:
            title = title[1:].lstrip()
        prefix, sep, rest = title.partition(":")
        if sep and not colon:
            namespace = prefix.strip().lower()
            if namespace in _DROP_NAMESPACES:
                return
            if node.text is None and _INTERLANG.fullmatch(namespace):
                return
        if node.text is not None:
            label = self.inline(node.text)
            if label.strip():
                out.append(label)
                return
            # Pipe trick: [[Page (disambiguation)|]] shows "Page".
            shown = rest if sep else title
            out.append(re.sub(r"\s*\([^)]*\)\s*$", "", shown).split(",")[0])
            return
        out.append(html.unescape(title))

    def tag(self, node: Tag, out: list[str]) -> None:
        """HTML and wiki tags: drop apparatus, keep the inner text of formatting tags."""
        markup = node.wiki_markup
        if markup:
            if markup == "{|" or markup == "----":
                out.append("\n\n")
            elif node.contents is not None:
                self.render(node.contents.nodes, out)  # '' and ''' (italic / bold)
            return
        name = str(node.tag).strip().lower()
        if name == "br":
            out.append(" ")
            return
        if name in _BLOCK_DROP_TAGS:
            out.append("\n\n")
            return
        if name in _DROP_TAGS or node.contents is None:
            return
        if name == "nowiki":
            out.append(html.unescape(str(node.contents)))
        elif name in ("math", "chem", "ce"):
            latex = _render_latex(str(node.contents))
            # Display math stands on its own line, so the source often has no spaces around it.
            block = node.has("display") and str(node.get("display").value).strip() == "block"
            out.append(f" {latex} " if block else latex)
        elif name in _BLOCK_KEEP_TAGS:
            out.append("\n\n")
            self.render(node.contents.nodes, out)
            out.append("\n\n")
        elif name == "sup":
            inner = self.inline(node.contents)
            # 10<sup>23</sup> is a power: keep it readable as 10^23, not 1023.
            previous = out[-1] if out else ""
            if previous[-1:].isdigit() and PLAIN_NUMBER.fullmatch(inner.strip()):
                inner = "^" + inner.strip()
            out.append(inner)
        else:
            self.render(node.contents.nodes, out)

    def template(self, node: Template) -> str:
        """Render one template (:func:`pipeline.text.templates.render_template_node`)."""
        return render_template_node(self, node)


def render_template(wikitext: str) -> str:
    """Render a snippet of wikitext (e.g. one template call) to one line of plain text."""
    renderer = _Renderer()
    return _clean_inline(renderer.inline(_parse(wikitext)))


# --------------------------------------------------------------------------------------
# Public: wikitext -> paragraphs
# --------------------------------------------------------------------------------------


def wikitext_to_paragraphs(wikitext: str) -> list[Paragraph]:
    """Prose paragraphs of an article in document order, each with its innermost section.

    Lists, tables, infoboxes, references, files and apparatus sections are dropped; fact
    templates (convert, dates, currencies, as of...) are rendered as text.
    """
    text = _strip_tables(_cut_excluded_sections(_PRE_STRIP.sub("", wikitext)))
    code = _parse(text)
    renderer = _Renderer()
    paragraphs: list[Paragraph] = []
    section = ""
    skip_level = 0
    run: list[Node] = []

    def flush() -> None:
        if run:
            out: list[str] = []
            renderer.render(run, out)
            paragraphs.extend(Paragraph(section, t) for t in _paragraph_texts("".join(out)))
            run.clear()

    for node in code.nodes:
        if type(node) is Heading:
            level = node.level
            if skip_level and level > skip_level:
                continue
            flush()
            section = _clean_inline(renderer.inline(node.title))
            skip_level = level if _is_excluded_title(section) else 0
        elif not skip_level:
            run.append(node)
    flush()
    return paragraphs


# --------------------------------------------------------------------------------------
# Public: artifact metric
# --------------------------------------------------------------------------------------

# "()", "( )", "(, )", "(; )"... but not an ellipsis "[...]" in a quotation.
_ARTIFACT_EMPTY = re.compile(r"\(\s*[,;:]*\s*\)|\[\s*[,;:]*\s*\]")
# A word that needs an object, then a space and punctuation: the gap of a dropped template.
_ARTIFACT_DANGLING = re.compile(
    r"\b(?:" + "|".join(sorted(_DANGLING_WORDS)) + r") +[.,;:)]",
    re.I,
)
_ARTIFACT_SPACE_PUNCT = re.compile(r"\s{2,}[.,;:!?]|\s[.,;:](?=\s|$)")
_ARTIFACT_MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|<ref\b|''")


def template_artifacts(sentence: str) -> list[str]:
    """Problems left in a sentence by dropped templates or markup ([] when clean).

    Each entry names the problem and quotes it, e.g. ``"empty brackets: ()"``,
    ``"dangling word: of ."``, ``"space before punctuation: ' ,'"``, ``"markup: {{"``.
    """
    problems: list[str] = []
    for match in _ARTIFACT_EMPTY.finditer(sentence):
        problems.append(f"empty brackets: {match.group(0)}")
    for match in _ARTIFACT_DANGLING.finditer(sentence):
        problems.append(f"dangling word: {match.group(0)}")
    for match in _ARTIFACT_SPACE_PUNCT.finditer(sentence):
        problems.append(f"space before punctuation: {match.group(0)!r}")
    for match in _ARTIFACT_MARKUP.finditer(sentence):
        problems.append(f"markup: {match.group(0)}")
    return problems
