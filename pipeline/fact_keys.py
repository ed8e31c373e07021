"""The comparison form of a quadruple's subject, relation and object: two facts are about the
same thing when their keys are equal (the ledger's supersession, the temporal questions)."""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s]")


def normalize_key(text: str | None) -> str:
    """Comparison form of a subject / relation / object: NFKC, case-folded, punctuation
    dropped, leading article dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = " ".join(_PUNCT.sub(" ", text).split())
    for article in ("the ", "a ", "an "):
        if text.startswith(article):
            return text[len(article) :]
    return text
