"""Text: wikitext -> prose paragraphs (:mod:`.wikitext`, with the inline templates of
:mod:`.templates` and ``<math>`` made readable), paragraphs -> sentences and their keys
(:mod:`.sentences`)."""

from pipeline.text.sentences import (
    MAX_PARSE_CHARS,
    SentenceSplitter,
    load_spacy,
    normalize_sentence,
    parse_pieces,
    sentence_hash,
)
from pipeline.text.wikitext import render_template, template_artifacts, wikitext_to_paragraphs

__all__ = [
    "MAX_PARSE_CHARS",
    "SentenceSplitter",
    "load_spacy",
    "normalize_sentence",
    "parse_pieces",
    "render_template",
    "sentence_hash",
    "template_artifacts",
    "wikitext_to_paragraphs",
]
