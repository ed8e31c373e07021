"""Draw the annotation sample of one release: ``<annotations_root>/<release>/tasks.jsonl``.

A seeded, stratified random sample of the release's ``new`` and ``changed`` sentences (GrowOVER
Appendix D took 30 of each), optionally plus QA items of type new / changed. Each task carries
what an annotator needs to judge the new sentence against the OLD article (the release's
``previous_release`` snapshot):

- ``sentence`` and ``new_context`` (its neighbours in the new article, for pronouns);
- ``old_context``: the old sentences around where the sentence sits, located through the
  alignment of its neighbours (changed: around the old sentence it replaces);
- ``old_section``: the old sentences of the same section, when that section existed;
- ``closest_old``: the old sentence it replaces (changed) or the old sentence sharing most
  words with it (new), so both kinds look alike to a blind annotator;
- ``replaces`` (changed only) and ``label`` / ``rule``: kept for the report, hidden by the
  server.

The whole old article is served on demand by the server. Task ids are a hash of the release
and the sentence, so the same sentence keeps its id when a sample is drawn again.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.annotate import (
    SAMPLE_FILE,
    TASK_LABELS,
    TASKS_FILE,
    read_judgments,
    release_annotations_dir,
)
from pipeline.errors import WikidriftError
from pipeline.layout import (
    check_release,
    list_releases,
    read_manifest,
    read_release_table,
    read_snapshot_table,
)
from pipeline.storage import write_json_atomic, write_text_atomic

# Old sentences shown on each side of an anchor (a matched old sentence).
CONTEXT_RADIUS = 2
CHANGED_CONTEXT_RADIUS = 3
# A long old section is cut to this many sentences around the anchor.
MAX_SECTION_SENTENCES = 60
NEW_CONTEXT_BEFORE = 2
NEW_CONTEXT_AFTER = 1

_WORD = re.compile(r"\w+")
# Words too common to say two sentences are about the same thing.
_STOPWORD_TEXT = (
    "the a an and or of in on at to for by with from as is was were are be been has have had "
    "it its he she his her they their this that which who also"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass
class SampleSummary:
    """What ``annotate sample`` drew and where it went."""

    release: str
    old_snapshot: str
    path: str
    seed: int
    per_label: int
    include_qa: int
    available: dict[str, int] = field(default_factory=dict)
    taken: dict[str, int] = field(default_factory=dict)
    unchanged: bool = False
    replaced_judged: int = 0

    def lines(self) -> list[str]:
        """Human-readable summary for the CLI."""
        parts = [f"{k}={v} (of {self.available.get(k, 0)})" for k, v in self.taken.items()]
        out = [
            f"annotation sample {self.release} vs {self.old_snapshot} (seed {self.seed}): "
            + " ".join(parts)
        ]
        for key, taken in self.taken.items():
            wanted = self.include_qa if key.startswith("qa_") else self.per_label
            if not key.startswith("qa_") and taken < wanted:
                out.append(f"note: only {taken} {key} sentence(s) in this release (asked {wanted})")
        if self.unchanged:
            out.append(f"{self.path} already holds exactly this sample: left as is")
        else:
            out.append(f"wrote {self.path}")
        if self.replaced_judged:
            out.append(
                f"warning: replaced tasks that had {self.replaced_judged} judgment(s) (--force); "
                "judgments of tasks drawn again still count, the others are ignored by the report"
            )
        return out


# --------------------------------------------------------------------------- helpers
def task_id(release: str, page_id: int, new_idx: int, text: str) -> str:
    """Stable id of a sentence task."""
    blob = f"{release}|{page_id}|{new_idx}|{text}".encode()
    return "s-" + hashlib.sha1(blob).hexdigest()[:12]


def qa_task_id(release: str, item_id: str) -> str:
    """Stable id of a QA task."""
    return "q-" + hashlib.sha1(f"{release}|qa|{item_id}".encode()).hexdigest()[:12]


def _rng(seed: int, stratum: str) -> random.Random:
    # One generator per stratum: asking for more QA items never changes the sentences drawn.
    return random.Random(f"wikidrift-annotate:{seed}:{stratum}")


def _draw(rows: list[dict[str, Any]], k: int, seed: int, stratum: str) -> list[dict[str, Any]]:
    if k <= 0 or not rows:
        return []
    return _rng(seed, stratum).sample(rows, min(k, len(rows)))


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _by_page(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    pages: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        pages[row["page_id"]].append(row)
    for sents in pages.values():
        sents.sort(key=lambda r: r["sent_idx"])
    return pages


def _anchors(aligned: dict[int, list[int]], new_idx: int, n_new: int) -> list[int]:
    """Old indices bracketing where new sentence ``new_idx`` sits: the last old sentence
    matched before it and the first matched after it."""
    anchors = []
    for j in range(new_idx - 1, -1, -1):
        if aligned.get(j):
            anchors.append(max(aligned[j]))
            break
    for j in range(new_idx + 1, n_new):
        if aligned.get(j):
            anchors.append(min(aligned[j]))
            break
    return anchors


def _sentence_view(s: dict[str, Any]) -> dict[str, Any]:
    return {"sent_idx": s["sent_idx"], "section": s["section"], "text": s["text"]}


class _TaskBuilder:
    """Builds tasks for one release from the tables it reads once."""

    def __init__(self, workdir: Path, release: str, old: str, labels: list[dict], pages: set[int]):
        self.release = release
        self.old = old
        ids = sorted(pages)
        cols = ["page_id", "sent_idx", "para_idx", "section", "text"]
        self.old_sents = _by_page(
            read_snapshot_table(workdir, old, "sentences", page_ids=ids, columns=cols).to_pylist()
        )
        self.new_sents = _by_page(
            read_snapshot_table(
                workdir, release, "sentences", page_ids=ids, columns=cols
            ).to_pylist()
        )
        art_cols = ["page_id", "title", "revision_id"]
        self.old_articles = {
            a["page_id"]: a
            for a in read_snapshot_table(
                workdir, old, "articles", page_ids=ids, columns=art_cols
            ).to_pylist()
        }
        self.new_articles = {
            a["page_id"]: a
            for a in read_snapshot_table(
                workdir, release, "articles", page_ids=ids, columns=art_cols
            ).to_pylist()
        }
        # page -> new_idx -> old indices it was aligned with (unchanged / changed / ...)
        self.aligned: dict[int, dict[int, list[int]]] = defaultdict(dict)
        for row in labels:
            if row["page_id"] in pages and row["new_idx"] is not None:
                self.aligned[row["page_id"]][row["new_idx"]] = list(row["old_idx"] or [])

    def _old_by_idx(self, page_id: int) -> dict[int, dict[str, Any]]:
        return {s["sent_idx"]: s for s in self.old_sents.get(page_id, [])}

    def _old_context(self, page_id: int, anchors: list[int], radius: int) -> list[dict[str, Any]]:
        old = self._old_by_idx(page_id)
        if not old:
            return []
        if not anchors:  # nothing aligned in this article: its opening is the best guess
            keep = sorted(old)[: 2 * radius + 1]
        else:
            keep = sorted(
                {i for a in anchors for i in range(a - radius, a + radius + 1)} & set(old)
            )
        return [_sentence_view(old[i]) for i in keep]

    def _old_section(self, page_id: int, section: str, anchor: int | None) -> dict[str, Any] | None:
        sents = [s for s in self.old_sents.get(page_id, []) if s["section"] == section]
        if not sents:
            return None
        total = len(sents)
        if total > MAX_SECTION_SENTENCES:
            # Centre the cut on the anchor so the relevant part is always inside it.
            pos = 0
            if anchor is not None:
                pos = min(range(total), key=lambda i: abs(sents[i]["sent_idx"] - anchor))
            start = max(0, min(pos - MAX_SECTION_SENTENCES // 2, total - MAX_SECTION_SENTENCES))
            sents = sents[start : start + MAX_SECTION_SENTENCES]
        return {
            "name": section,
            "sentences": [{"sent_idx": s["sent_idx"], "text": s["text"]} for s in sents],
            "total": total,
            "truncated": total > len(sents),
        }

    def _closest_lexical(self, page_id: int, text: str, near: int | None) -> dict[str, Any] | None:
        words = _words(text)
        best: tuple[float, int, dict[str, Any]] | None = None
        for s in self.old_sents.get(page_id, []):
            other = _words(s["text"])
            union = words | other
            score = len(words & other) / len(union) if union else 0.0
            distance = abs(s["sent_idx"] - near) if near is not None else s["sent_idx"]
            if score > 0 and (best is None or (score, -distance) > (best[0], best[1])):
                best = (score, -distance, s)
        if best is None:
            return None
        s = best[2]
        return {
            "sent_idx": s["sent_idx"],
            "section": s["section"],
            "text": s["text"],
            "source": "lexical",
            "overlap": round(best[0], 3),
        }

    def _new_context(self, page_id: int, new_idx: int, section: str) -> dict[str, list[dict]]:
        sents = [s for s in self.new_sents.get(page_id, []) if s["section"] == section]
        pos = next((i for i, s in enumerate(sents) if s["sent_idx"] == new_idx), None)
        if pos is None:
            return {"before": [], "after": []}
        view = [{"sent_idx": s["sent_idx"], "text": s["text"]} for s in sents]
        return {
            "before": view[max(0, pos - NEW_CONTEXT_BEFORE) : pos],
            "after": view[pos + 1 : pos + 1 + NEW_CONTEXT_AFTER],
        }

    def _common(self, page_id: int, new_idx: int, text: str, old_idx: list[int]) -> dict[str, Any]:
        """Context fields shared by sentence and QA tasks."""
        new_by_idx = {s["sent_idx"]: s for s in self.new_sents.get(page_id, [])}
        section = new_by_idx[new_idx]["section"] if new_idx in new_by_idx else ""
        n_new = max(new_by_idx, default=-1) + 1
        if old_idx:
            anchors, radius = sorted(old_idx), CHANGED_CONTEXT_RADIUS
        else:
            anchors, radius = _anchors(self.aligned[page_id], new_idx, n_new), CONTEXT_RADIUS
        old = self._old_by_idx(page_id)
        anchor = anchors[0] if anchors else None
        if old_idx and old_idx[0] in old:
            s = old[old_idx[0]]
            closest = {
                "sent_idx": s["sent_idx"],
                "section": s["section"],
                "text": s["text"],
                "source": "aligned",
            }
        else:
            closest = self._closest_lexical(page_id, text, anchor)
        new_art = self.new_articles.get(page_id, {})
        old_art = self.old_articles.get(page_id)
        return {
            "release": self.release,
            "old_snapshot": self.old,
            "page_id": page_id,
            "title": new_art.get("title") or (old_art or {}).get("title") or str(page_id),
            "old_title": old_art["title"] if old_art else None,
            "new_revision_id": new_art.get("revision_id"),
            "old_revision_id": old_art["revision_id"] if old_art else None,
            "old_article_sentences": len(old),
            "new_idx": new_idx,
            "section": section,
            "sentence": text,
            "new_context": self._new_context(page_id, new_idx, section),
            "old_context": self._old_context(page_id, anchors, radius),
            "old_section": self._old_section(page_id, section, anchor),
            "closest_old": closest,
        }

    def sentence_task(self, row: dict[str, Any]) -> dict[str, Any]:
        """A task for one labeled sentence."""
        old_idx = list(row["old_idx"] or []) if row["label"] == "changed" else []
        task = {
            "task_id": task_id(self.release, row["page_id"], row["new_idx"], row["text"]),
            "kind": "sentence",
            "label": row["label"],
            "rule": row["rule"],
            "decided_by": row["decided_by"],
            "similarity": row["similarity"],
        }
        task |= self._common(row["page_id"], row["new_idx"], row["text"], old_idx)
        if row["label"] == "changed":
            task["replaces"] = {"sent_idx": old_idx, "text": row["old_text"]}
        return task

    def qa_task(self, item: dict[str, Any]) -> dict[str, Any]:
        """A task for one QA item: is its answer supported by the old article?"""
        evidence = list(item["evidence_sent_idx"] or [])
        new_idx = evidence[0] if evidence else -1
        old_idx = sorted(
            {i for e in evidence for i in self.aligned[item["page_id"]].get(e, [])}
            if item["type"] == "changed"
            else set()
        )
        task = {
            "task_id": qa_task_id(self.release, item["item_id"]),
            "kind": "qa",
            "label": item["type"],
            "rule": f"qa:{item['origin']}",
            "decided_by": item["generator"],
            "similarity": None,
        }
        task |= self._common(item["page_id"], new_idx, item["evidence_text"], old_idx)
        task["qa"] = {
            "item_id": item["item_id"],
            "question": item["question"],
            "answer": item["answer"],
            "previous_answer": item["previous_answer"],
            "evidence_sent_idx": evidence,
        }
        return task


def _first_release_message(workdir: Path, release: str) -> str:
    later = [r for r in list_releases(workdir) if r > release]
    hint = f" (e.g. --release {later[0]})" if later else " once a later snapshot is released"
    return (
        f"release {release} is the first release: every sentence is labeled 'new' by rule "
        "(initial_snapshot) with no older snapshot to compare against, so there is nothing to "
        f"validate; sample a later release{hint}"
    )


def _split_qa(n: int, available: dict[str, int]) -> dict[str, int]:
    """Split ``n`` QA items evenly over new / changed, giving what one lacks to the other."""
    want = {"new": n - n // 2, "changed": n // 2}
    for a, b in (("new", "changed"), ("changed", "new")):
        short = want[a] - available[a]
        if short > 0:
            want[a] -= short
            want[b] += short
    return {k: min(v, available[k]) for k, v in want.items()}


# --------------------------------------------------------------------------- entry point
def build_sample(
    workdir: str | Path,
    release: str,
    *,
    per_label: int = 30,
    seed: int = 0,
    include_qa: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, int], dict[str, int], str]:
    """The tasks of a sample (not written): (tasks in annotation order, available per stratum,
    taken per stratum, old snapshot)."""
    workdir = Path(workdir)
    if per_label < 0 or include_qa < 0:
        raise WikidriftError("--per-label and --include-qa must be >= 0")
    manifest = read_manifest(workdir, release)
    old = manifest.previous_release
    if old is None:
        raise WikidriftError(_first_release_message(workdir, release))
    labels = read_release_table(workdir, release, "sentence_labels").to_pylist()
    strata = {
        lab: sorted(
            (
                r
                for r in labels
                if r["label"] == lab
                and r["new_idx"] is not None
                and r["rule"] != "initial_snapshot"
            ),
            key=lambda r: (r["page_id"], r["new_idx"]),
        )
        for lab in TASK_LABELS
    }
    available = {lab: len(rows) for lab, rows in strata.items()}
    picked = {lab: _draw(rows, per_label, seed, lab) for lab, rows in strata.items()}
    qa_picked: dict[str, list[dict[str, Any]]] = {}
    if include_qa:
        qa = read_release_table(workdir, release, "qa").to_pylist()
        qa_strata = {
            t: sorted((q for q in qa if q["type"] == t), key=lambda q: q["item_id"])
            for t in TASK_LABELS
        }
        for t, rows in qa_strata.items():
            available[f"qa_{t}"] = len(rows)
        counts = _split_qa(include_qa, {t: len(r) for t, r in qa_strata.items()})
        qa_picked = {t: _draw(qa_strata[t], counts[t], seed, f"qa_{t}") for t in TASK_LABELS}
    if not any(picked.values()) and not any(qa_picked.values()):
        raise WikidriftError(
            f"release {release} has no new or changed sentences to annotate (vs {old})"
        )
    pages = {r["page_id"] for rows in picked.values() for r in rows}
    pages |= {q["page_id"] for rows in qa_picked.values() for q in rows}
    builder = _TaskBuilder(workdir, manifest.snapshot, old, labels, pages)
    tasks = [builder.sentence_task(r) for lab in TASK_LABELS for r in picked[lab]]
    tasks += [builder.qa_task(q) for t in TASK_LABELS for q in qa_picked.get(t, [])]
    # Shuffled together so an annotator cannot tell the stratum from the position.
    _rng(seed, "order").shuffle(tasks)
    taken = {lab: len(rows) for lab, rows in picked.items()}
    taken |= {f"qa_{t}": len(rows) for t, rows in qa_picked.items()}
    return tasks, available, taken, old


def sample_tasks(
    workdir: str | Path,
    release: str,
    *,
    per_label: int = 30,
    seed: int = 0,
    include_qa: int = 0,
    annotations_root: str | Path | None = None,
    force: bool = False,
) -> SampleSummary:
    """Draw the sample of ``release`` and write ``tasks.jsonl`` (+ ``sample.json``). Refuses to
    replace a tasks file that already has judgments unless ``force``."""
    check_release(workdir, release)
    tasks, available, taken, old = build_sample(
        workdir, release, per_label=per_label, seed=seed, include_qa=include_qa
    )
    out_dir = release_annotations_dir(workdir, release, annotations_root)
    path = out_dir / TASKS_FILE
    text = "".join(json.dumps(t, ensure_ascii=False, sort_keys=True) + "\n" for t in tasks)
    summary = SampleSummary(
        release=release,
        old_snapshot=old,
        path=str(path),
        seed=seed,
        per_label=per_label,
        include_qa=include_qa,
        available=available,
        taken=taken,
    )
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            summary.unchanged = True
            return summary
        judged = read_judgments(out_dir)
        if judged.total() and not force:
            raise WikidriftError(
                f"{path} already has {judged.total()} judgment(s) by "
                f"{len(judged.latest)} annotator(s) ({', '.join(sorted(judged.latest))}) that "
                "refer to its task ids; a new sample would orphan them. Report on them first "
                "(`wikidrift annotate report`), or pass --force to replace the tasks anyway"
            )
        summary.replaced_judged = judged.total()
    write_text_atomic(path, text)
    write_json_atomic(out_dir / SAMPLE_FILE, asdict(summary) | {"n_tasks": len(tasks)})
    return summary
