"""The word alignment of an old sentence and its revision: which values of the old sentence
were kept, replaced or removed, and which values of the new one were added.

Values are what :func:`pipeline.facts.sentence_values` reads (points in time, numbers, named
entities); :func:`compare_slots` places them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.facts import Value, fold, same_value, sentence_values

# Where GrowOVER asks NLI whether a revised sentence contradicts its old version, the offline
# path asks which *values* of the old sentence are gone and what stands in their place. The two
# sentences are aligned word by word; a value of the old sentence is
#   kept      when the aligned part of the new sentence holds the same value, or a more or
#             less precise form of it ("2021" / "September 2021", "FC Porto" / "Porto"),
#   replaced  when the aligned part holds another value of the same kind in its role
#             ("PhD in 2016" -> "PhD in 2015", "principal is Steiner" -> "is Komatsu"),
#   removed   when nothing of its kind stands in its place.
# A value of the new sentence that no old value accounts for is added. Additions and removals
# alone never make an update; only a replaced value does.

_WORD_RE = re.compile(r"\w+(?:[.'’]\w+)*|[^\w\s]")
_ARTICLES = frozenset(["the", "a", "an"])
# Legal forms a company's name may carry or drop without becoming another company.
_LEGAL_FORMS = frozenset(["inc", "corp", "co", "ltd", "llc", "plc", "lp", "gmbh", "ag", "sa"])


@dataclass(frozen=True)
class Replacement:
    """An old value and the value of the same kind that took its place."""

    kind: str
    old: str
    new: str
    old_label: str = ""
    new_label: str = ""
    swap: bool = False  # the two values are all that differs in their stretch of the sentence


@dataclass(frozen=True)
class SlotDiff:
    """How the values of an old sentence fare in a new one (see the comment above)."""

    replaced: tuple[Replacement, ...]
    removed: tuple[Value, ...]
    added: tuple[Value, ...]
    refined: tuple[Value, ...]  # old values the new sentence states more precisely
    # removed old values with a new value of another kind in their place ("iPhone 13" ->
    # "iPhone X": a number gone, a name come)
    displaced: tuple[Replacement, ...]
    kept_old: float  # share of the old sentence's words found in place in the new one
    kept_new: float  # share of the new sentence's words found in place in the old one
    deleted_words: str  # old words that are gone or replaced
    inserted_words: str  # new words that were inserted or stand in for old ones
    # capitalised words added at or dropped from one end of a name kept in place ("HBO Max"
    # -> "Max", "Haas F1 Team" -> "MoneyGram Haas F1 Team"): maybe another name
    name_edges: tuple[str, ...] = ()


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(fold(m.group()), m.start(), m.end()) for m in _WORD_RE.finditer(text)]


def _token_range(words: list[tuple[str, int, int]], start: int, end: int) -> tuple[int, int]:
    inside = [k for k, (_, s, e) in enumerate(words) if s < end and start < e]
    return (inside[0], inside[-1] + 1) if inside else (0, 0)


def _capitalised(text: str) -> bool:
    return text[:1].isupper()


def _name_edge(text: str, words: list[tuple[str, int, int]], lo: int, hi: int) -> str | None:
    """The words ``words[lo:hi]`` (all inserted, or all deleted) when they are capitalised and
    stand at one end of a capitalised word kept beside them: a name grown or cut at its start
    or end. Words between two capitalised words (a middle name), a legal form ("Inc."), and
    the sentence's first word do not count; punctuation is no name."""
    span = [text[s:e] for _, s, e in words[lo:hi]]
    if lo == 0 or not all(w[:1].isalnum() and _capitalised(w) for w in span):
        return None
    if all(fold(w) in _LEGAL_FORMS for w in span):
        return None
    left = text[words[lo - 1][1] : words[lo - 1][2]]
    right = text[words[hi][1] : words[hi][2]] if hi < len(words) else ""
    possessive = ("'s", "’s")  # an owner, not part of the name beside it
    if span[-1].endswith(possessive):
        return None
    left_name = _capitalised(left) and not left.endswith(possessive)
    if left_name and _capitalised(right):
        return None
    # the sentence's first word is capitalised whatever it is
    return " ".join(span) if (left_name and lo - 1 > 0) or _capitalised(right) else None


def compare_slots(
    old: str,
    new: str,
    old_entities: Iterable[tuple[int, int, str]] = (),
    new_entities: Iterable[tuple[int, int, str]] = (),
) -> SlotDiff:
    """Align ``old`` and ``new`` word by word and sort the old sentence's values into kept,
    replaced and removed, and the new sentence's into accounted for and added. Entities come
    as NER character spans (start, end, label) of each sentence."""
    from difflib import SequenceMatcher

    ow, nw = _words(old), _words(new)
    ov, nv = sentence_values(old, old_entities), sentence_values(new, new_entities)
    ops = SequenceMatcher(None, [w for w, *_ in ow], [w for w, *_ in nw], autojunk=False)
    opcodes = ops.get_opcodes()

    def aligned(i0: int, i1: int) -> tuple[int, int]:
        """The new-token range aligned with old tokens [i0, i1)."""
        lo, hi = len(nw), 0
        for tag, a0, a1, b0, b1 in opcodes:
            if a1 <= i0 or a0 >= i1:
                continue
            if tag == "equal":
                lo, hi = min(lo, b0 + max(a0, i0) - a0), max(hi, b0 + min(a1, i1) - a0)
            else:
                lo, hi = min(lo, b0), max(hi, b1)
        return (lo, hi) if lo < hi else (0, 0)

    def swapped(old_range: tuple[int, int], new_range: tuple[int, int]) -> bool:
        """Whether the two values are all that differs in their stretch of the sentence:
        every edit that touches either lies inside both ("macOS Ventura" -> "macOS Sonoma"),
        an article before the values aside; not "in Davos" -> "at the World Economic
        Forum"."""
        edits = [
            (a0 + (ow[a0][0] in _ARTICLES if a0 < a1 else 0), a1, b0, b1)
            for tag, a0, a1, b0, b1 in opcodes
            if tag != "equal"
            and (a0 < old_range[1] and old_range[0] < a1 or b0 < new_range[1] and new_range[0] < b1)
        ]
        return bool(edits) and all(
            old_range[0] <= a0
            and a1 <= old_range[1]
            and new_range[0] - 1 <= b0 <= b1 <= new_range[1]
            for a0, a1, b0, b1 in edits
        )

    new_ranges = [_token_range(nw, v.start, v.end) for v in nv]
    accounted: set[int] = set()
    replaced: list[Replacement] = []
    refined: list[Value] = []
    unplaced: list[tuple[Value, list[int]]] = []
    # First the values that something in their own place accounts for, then the rest: a value
    # repeated elsewhere ("Three players and three contributors") must not be taken twice.
    nears = []
    for value in ov:
        lo, hi = aligned(*_token_range(ow, value.start, value.end))
        nears.append([k for k, (s, e) in enumerate(new_ranges) if s < hi and lo < e])
    pairs = list(zip(ov, nears, strict=True))
    in_place = {k for value, near in pairs for k in near if same_value(value, nv[k])}
    for value, near in pairs:
        same = [k for k in near if same_value(value, nv[k])]
        rivals = [k for k in near if nv[k].kind == value.kind and k not in accounted]
        if rivals and not same:
            # still listed right beside its would-be replacement ("second or third" ->
            # "second, third or fourth"): the list grew, the alignment was off by a word
            r0, r1 = new_ranges[rivals[0]]
            same = [
                k
                for k, (s, e) in enumerate(new_ranges)
                if k not in accounted
                and k not in in_place
                and same_value(value, nv[k])
                and max(s - r1, r0 - e) < 3
            ][:1]
        if same:
            accounted.update(same)
            if any(len(nv[k].norm) > len(value.norm) for k in same if value.kind == "time"):
                refined.append(value)
        elif rivals:
            accounted.update(rivals)
            rival = nv[rivals[0]]
            swap = swapped(_token_range(ow, value.start, value.end), new_ranges[rivals[0]])
            replaced.append(
                Replacement(value.kind, value.text, rival.text, value.label, rival.label, swap)
            )
        else:
            unplaced.append((value, near))
    removed: list[tuple[Value, list[int]]] = []
    for value, near in unplaced:
        free = [k for k in range(len(nv)) if k not in accounted]
        moved = [k for k in free if same_value(value, nv[k])]
        if moved:  # said elsewhere in the new sentence: moved, not changed
            accounted.add(moved[0])
        else:
            removed.append((value, near))
    added = [v for k, v in enumerate(nv) if k not in accounted]
    displaced = []
    for value, near in removed:
        k = next((k for k in near if k not in accounted), None)
        if k is not None:
            displaced.append(Replacement(value.kind, value.text, nv[k].text, value.label))
    kept_old = kept_new = 0
    deleted: list[str] = []
    inserted: list[str] = []
    edges: list[str | None] = []
    for tag, a0, a1, b0, b1 in opcodes:
        if tag == "equal":
            kept_old += sum(1 for w, *_ in ow[a0:a1] if w[:1].isalnum())
            kept_new += sum(1 for w, *_ in nw[b0:b1] if w[:1].isalnum())
        else:
            deleted.extend(old[s:e] for _, s, e in ow[a0:a1])
            inserted.extend(new[s:e] for _, s, e in nw[b0:b1])
        if tag == "insert":
            edges.append(_name_edge(new, nw, b0, b1))
        elif tag == "delete":
            edges.append(_name_edge(old, ow, a0, a1))
    words_old = sum(1 for w, *_ in ow if w[:1].isalnum()) or 1
    words_new = sum(1 for w, *_ in nw if w[:1].isalnum()) or 1
    return SlotDiff(
        replaced=tuple(replaced),
        removed=tuple(v for v, _ in removed),
        added=tuple(added),
        refined=tuple(refined),
        displaced=tuple(displaced),
        kept_old=kept_old / words_old,
        kept_new=kept_new / words_new,
        deleted_words=" ".join(deleted),
        inserted_words=" ".join(inserted),
        name_edges=tuple(e for e in edges if e),
    )
