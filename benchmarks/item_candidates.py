"""Candidate items for the item gold set: every item the real local LLM writes for wikisnap
articles outside the ``make run`` sample, kept or not, with everything needed to score a check
again without calling the model.

For each date the script plans the generation requests exactly as ``wikidrift run`` does (the
first date from selected paragraphs, later dates from the labels against the date before),
runs every kind's generator, and records each *parsed* candidate the validator scored: its
fields, its evidence and the sentences its prompt offered, the raw model output, every check's
result and what finally happened to it (kept, or the reject code). The answers of the model's
own checks (the QA round trip, the temporal phrasings) are stored beside it, keyed by request,
so ``bench_items --gold`` replays them. Temporal questions are planned from the quadruples kept
over all dates and phrased by the model or a template (``--phrasing``).

    .venv/bin/python -m benchmarks.item_candidates --out /tmp/item_candidates.jsonl \
        [--dates 2024-01-01,2024-06-01,2025-01-01] [--pages all|dev|test|ID,ID] [--workdir W]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.item_gold import GOLD_PAGES, request_key  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.generate.kinds import Batch, item_generators  # noqa: E402
from pipeline.generate.stage import plan_tasks  # noqa: E402
from pipeline.generate.validate import Verdict  # noqa: E402
from pipeline.generate.validator import ItemValidator  # noqa: E402
from pipeline.labeling.stage import label_snapshots, make_labeler  # noqa: E402
from pipeline.models.llm.base import LLMRequest, LLMResponse  # noqa: E402
from pipeline.runtime import base_embedder, cached_embedder, llm_from_config  # noqa: E402
from pipeline.temporal.phrasing import (  # noqa: E402
    phrase_questions,
    phrasing_request,
    without_ambiguity,
)
from pipeline.temporal.questions import Fact, question_specs  # noqa: E402
from pipeline.temporal.templates import template_phrasings  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import build_wikisnap_snapshots  # noqa: E402


class RecordingBackend:
    """Passes requests on and keeps every answer's text by request key."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.backend_id = inner.backend_id
        self.model = inner.model
        self.answers: dict[str, str] = {}

    def complete_many(self, requests: list[LLMRequest], **kwargs: Any) -> list[LLMResponse]:
        responses = self.inner.complete_many(requests, **kwargs)
        for request, response in zip(requests, responses, strict=True):
            if response.error is None:
                self.answers[request_key(request)] = response.text
        return responses


class RecordingValidator(ItemValidator):
    """The configured validator that also keeps every item it scored, with its verdict and
    the sentence indices its prompt offered."""

    scored: list[tuple[str, Any, tuple[int, ...], Verdict]]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scored = []
        self.turns_kept: dict[str, int] = {}

    def score_qa(self, item, *, n_sentences, allowed=None):  # type: ignore[no-untyped-def]
        verdict = super().score_qa(item, n_sentences=n_sentences, allowed=allowed)
        self.scored.append(("qa", item, tuple(allowed or ()), verdict))
        return verdict

    def score_dialogue(self, dialogue, *, n_sentences, allowed=None):  # type: ignore[no-untyped-def]
        verdict = super().score_dialogue(dialogue, n_sentences=n_sentences, allowed=allowed)
        self.scored.append(("dialogue", dialogue, tuple(allowed or ()), verdict))
        return verdict

    def turns_to_keep(self, dialogue, *, n_sentences, allowed=None):  # type: ignore[no-untyped-def]
        n, verdict = super().turns_to_keep(dialogue, n_sentences=n_sentences, allowed=allowed)
        self.turns_kept[dialogue.dialogue_id] = n
        return n, verdict

    def score_quadruple(self, quad, *, n_sentences, allowed=None):  # type: ignore[no-untyped-def]
        verdict = super().score_quadruple(quad, n_sentences=n_sentences, allowed=allowed)
        self.scored.append(("quadruple", quad, tuple(allowed or ()), verdict))
        return verdict


def _checks(verdict: Verdict) -> dict[str, str | None]:
    """Check name -> None when passed, else its detail."""
    return {c.name: (None if c.passed else c.detail or "failed") for c in verdict.checks}


def _purpose(item: Any) -> str:
    purpose = {"initial": "qa_initial", "new_sentences": "qa_new", "changed_sentence": "qa_changed"}
    return purpose[item.origin] + ("+retry" if "+" in item.prompt_hash else "")


def _record(
    kind: str,
    item: Any,
    offered: tuple[int, ...],
    verdict: Verdict,
    texts: Sequence[str],
    previous: str | None,
) -> dict[str, Any]:
    common = {
        "page_id": item.page_id,
        "title": item.title,
        "snapshot": item.snapshot,
        "previous_snapshot": previous,
        "n_sentences": len(texts),
        "offered": list(offered),
        "offered_text": {str(i): texts[i] for i in offered if 0 <= i < len(texts)},
        "checks": _checks(verdict),
        "prompt_hash": item.prompt_hash,
    }
    if kind == "qa":
        return {
            "cid": f"qa:{item.item_id}",
            "kind": "qa",
            "purpose": _purpose(item),
            **common,
            **{
                k: getattr(item, k)
                for k in (
                    "type",
                    "question",
                    "answer",
                    "previous_answer",
                    "evidence_sent_idx",
                    "evidence_text",
                    "old_evidence_sent_idx",
                    "old_evidence_text",
                    "raw_output",
                )
            },  # fmt: skip
        }
    if kind == "dialogue":
        return {
            "cid": f"dialogue:{item.dialogue_id}",
            "kind": "dialogue",
            "purpose": "dialogue",
            **common,
            "para_idx": item.para_idx,
            "turns": [asdict(t) for t in item.turns],
            "raw_output": item.raw_output,
        }
    return {
        "cid": f"quadruple:{item.item_id}",
        "kind": "quadruple",
        "purpose": "quadruples",
        **common,
        **{
            k: getattr(item, k)
            for k in (
                "type",
                "subject",
                "relation",
                "object",
                "timestamp",
                "evidence_sent_idx",
                "evidence_text",
            )
        },  # fmt: skip
    }


def _outcomes(out: Any) -> dict[str, str]:
    """id -> "kept" or the reject code, from one generator's output."""
    outcome: dict[str, str] = {}
    for row in out.rows:
        key = row.get("item_id") or row.get("dialogue_id")
        outcome[key] = "kept"
    for reject in out.rejects:
        if reject.item_json:
            item = json.loads(reject.item_json)
            key = item.get("item_id") or item.get("dialogue_id")
            if key and key not in outcome:
                outcome[key] = reject.reason
    return outcome


def _generate(
    workdir: Path, date: str, previous: str | None, cfg: Any, backend: RecordingBackend,
    embedder: Any, kinds: set[str],
) -> tuple[list[dict[str, Any]], Counter]:  # fmt: skip
    articles, _initial, _updated, _missing, tasks = plan_tasks(
        workdir, date, previous, embedder, cfg.generation, None
    )
    texts = {a.page_id: a.texts for a in articles}
    validator = RecordingValidator(
        **vars(ItemValidator.from_config(cfg.generation))  # the configured limits and parser
    )
    usage: Counter = Counter()
    batch = Batch(
        backend=backend,  # type: ignore[arg-type]
        usage=usage,
        generator=f"{backend.backend_id}:{backend.model}",
        validator=validator,
        cfg=cfg.generation,
        note=lambda msg: print(f"  {date} {msg}", flush=True),
        index=0,
    )
    records: list[dict[str, Any]] = []
    for gen in item_generators():
        if kinds and gen.table not in kinds:
            continue
        start = len(validator.scored)
        out = gen.run(tasks[gen.table], batch)
        outcome = _outcomes(out)
        raw_by_task = {
            (t.article.page_id, tuple(t.offered)): backend.answers.get(request_key(t.request))
            for t in tasks[gen.table]
            if t.request is not None  # parsed quadruples: no model output
        }
        for kind, item, offered, verdict in validator.scored[start:]:
            rec = _record(kind, item, offered, verdict, texts[item.page_id], previous)
            key = getattr(item, "item_id", None) or item.dialogue_id
            rec["outcome"] = outcome.get(key, "duplicate_candidate")
            if kind == "dialogue" and validator.turns_kept.get(key):
                rec["outcome"] = "kept"
                rec["turns_kept"] = validator.turns_kept[key]
            if kind == "quadruple":
                rec["raw_output"] = raw_by_task.get((item.page_id, offered))
            records.append(rec)
    return records, usage


def _temporal(
    quads: list[dict[str, Any]], backend: RecordingBackend, phrasing: str
) -> list[dict[str, Any]]:
    """Temporal questions over the kept quadruples of every date, phrased by the model or
    (``phrasing = "template"``) from the facts' words."""
    facts = [
        Fact(
            item_id=q["cid"].split(":", 1)[1],
            page_id=q["page_id"],
            title=q["title"],
            subject=q["subject"],
            relation=q["relation"],
            object=q["object"],
            timestamp=q["timestamp"],
            observed_at=q["snapshot"],
            status="current",
            superseded_by=None,
            fact_valid_until=None,
            evidence_text=q["evidence_text"],
        )
        for q in quads
        if q["outcome"] == "kept"
    ]
    by_page: dict[int, list[Fact]] = {}
    for f in facts:
        by_page.setdefault(f.page_id, []).append(f)
    specs = [s for page in by_page.values() for s in question_specs(page)]
    if phrasing == "template":
        phrasings = template_phrasings(specs)
    else:
        phrasings = phrase_questions(specs, backend)  # type: ignore[arg-type]
    phrasings = without_ambiguity(specs, phrasings)
    records = []
    for spec, phrasing in zip(specs, phrasings, strict=True):
        records.append(
            {
                "cid": f"temporal:{spec.question_id}",
                "kind": "temporal",
                "purpose": "temporal_question",
                "page_id": spec.facts[0].page_id,
                "title": spec.facts[0].title,
                "category": spec.category,
                "shape": spec.shape,
                "facts": [
                    {
                        "quadruple": f"quadruple:{f.item_id}",
                        "subject": f.subject,
                        "relation": f.relation,
                        "object": f.object,
                        "timestamp": f.timestamp,
                        "observed_at": f.observed_at,
                        "evidence_text": f.evidence_text,
                    }
                    for f in spec.facts
                ],
                "answer": list(spec.answer),
                "answer_mode": spec.answer_mode,
                "as_of": spec.as_of,
                "time_phrase": spec.time_phrase,
                "question": phrasing.question,
                "raw_output": None
                if phrasing == "template"
                else backend.answers.get(request_key(phrasing_request(spec))),
                "outcome": phrasing.reason or "kept",
                "checks": {"phrasing": phrasing.detail or phrasing.reason},
            }
        )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dates", default="2024-01-01,2024-06-01,2025-01-01")
    parser.add_argument("--pages", default="all", help="all | dev | test | page ids")
    parser.add_argument("--paragraphs", type=int, default=2, help="initial paragraphs / article")
    parser.add_argument("--workdir", type=Path, help="keep snapshots, labels and the LLM cache")
    parser.add_argument("--kinds", default="", help="only these tables (qa,dialogue,quadruples)")
    parser.add_argument(
        "--phrasing", choices=("llm", "template"), help="temporal questions (default: config's)"
    )
    args = parser.parse_args()
    kinds = set(filter(None, args.kinds.split(",")))

    dates = args.dates.split(",")
    if args.pages in ("all", "dev", "test"):
        pages = tuple(p for p, split in GOLD_PAGES.items() if args.pages in ("all", split))
    else:
        pages = tuple(int(p) for p in args.pages.split(","))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="item_candidates_"))
    build_wikisnap_snapshots(workdir, dates, pages, SentenceSplitter())
    overrides = {"generation": {"paragraphs_per_article": args.paragraphs}}
    cfg = load_config(profile="offline", overrides=overrides)
    backend = RecordingBackend(llm_from_config(cfg, workdir).backend)
    embedder = cached_embedder(base_embedder(cfg), workdir)
    labeler = make_labeler(cfg, workdir)
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    for i, date in enumerate(dates):
        previous = dates[i - 1] if i else None
        if previous:
            label_snapshots(workdir, previous, date, labeler)
        t0 = time.perf_counter()
        found, usage = _generate(workdir, date, previous, cfg, backend, embedder, kinds)
        records += found
        print(
            f"{date}: {len(found)} candidates {dict(Counter(r['kind'] for r in found))} "
            f"requests={usage['requests']} in {time.perf_counter() - t0:.0f}s",
            flush=True,
        )
    quads = [r for r in records if r["kind"] == "quadruple"]
    if quads:
        records += _temporal(quads, backend, args.phrasing or cfg.temporal.phrasing)
    # the model's answers to the round-trip checks, for replay
    checks = {k: v for k, v in backend.answers.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    args.out.with_suffix(".answers.json").write_text(json.dumps(checks, ensure_ascii=False))
    print(f"candidates={len(records)} {dict(Counter(r['kind'] for r in records))}")
    print(f"outcomes={dict(Counter(r['outcome'] for r in records))}")
    print(f"seconds={time.perf_counter() - started:.0f} out={args.out}")


if __name__ == "__main__":
    main()
