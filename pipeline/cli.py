"""``wikidrift`` command line. Thin: parses arguments, loads the config, calls the library.

Errors a user can act on are printed as one clear message (exit code 2), never a traceback;
Ctrl-C exits 130 and the next identical command resumes where this one stopped.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from pipeline.config import Config, load_config
from pipeline.errors import WikidriftError

log = logging.getLogger("wikidrift")


def _iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date like 2024-01-01") from None


def _add_common(p: argparse.ArgumentParser, *, workdir_required: bool = True) -> None:
    p.add_argument("--config", type=Path, help="TOML config (default: data/wikidrift.toml)")
    p.add_argument(
        "--workdir",
        type=Path,
        required=workdir_required,
        help="where snapshots/, labels/ and releases/ live",
    )
    p.add_argument("--profile", choices=["paper", "offline"], help="model profile")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details")


def _load(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> Config:
    overrides = dict(overrides or {})
    if getattr(args, "workdir", None) is not None:
        overrides["workdir"] = str(args.workdir)
    return load_config(args.config, profile=args.profile, overrides=overrides)


def _progress(total: int | None, desc: str) -> Any:
    from tqdm import tqdm

    # disable=None: a bar on a terminal, silence in logs and pipes.
    return tqdm(total=total, desc=desc, unit="article", disable=None, file=sys.stderr)


# --------------------------------------------------------------------------- snapshot
def _snapshot_overrides(args: argparse.Namespace) -> dict[str, Any]:
    snap: dict[str, Any] = {}
    if args.source:
        snap["source"] = args.source
    if args.input is not None:
        snap["input"] = args.input
    if args.articles is not None:
        snap["articles"] = args.articles
    if getattr(args, "current_events", None):
        start, _, end = args.current_events.partition(":")
        snap["current_events"] = {"start": start, "end": end or start}
    return {"snapshot": snap} if snap else {}


def cmd_snapshot(args: argparse.Namespace) -> int:
    """``wikidrift snapshot``: fetch, parse and store one snapshot."""
    from pipeline.snapshot import build_snapshot
    from pipeline.sources.factory import make_source, resolve_selection
    from pipeline.text import SentenceSplitter

    cfg = _load(args, _snapshot_overrides(args))
    workdir = Path(cfg.workdir)
    source, description = make_source(cfg, workdir, snapshot_date=args.date)
    selection = resolve_selection(cfg)
    splitter = SentenceSplitter(cfg.text.spacy_model or None, batch_size=cfg.text.batch_size)
    total = None if selection.is_all else len(selection.titles) + len(selection.page_ids)
    with _progress(total, f"snapshot {args.date}") as bar:
        summary = build_snapshot(
            source,
            selection,
            args.date,
            workdir,
            splitter=splitter,
            source_description=description,
            shard_size=cfg.snapshot.shard_size,
            force=args.force,
            progress=bar.update,
        )
    print(summary.line())
    return 0


# --------------------------------------------------------------------------- label
def cmd_label(args: argparse.Namespace) -> int:
    """``wikidrift label``: label the sentences of snapshot --new against snapshot --old."""
    from pipeline.labeling import label_snapshots, make_labeler

    overrides: dict[str, Any] = {"align": {"faithful": True}} if args.faithful else {}
    cfg = _load(args, overrides)
    workdir = Path(cfg.workdir)
    labeler = make_labeler(cfg, workdir, naive=args.naive)
    with _progress(None, f"label {args.old} -> {args.new}") as bar:
        summary = label_snapshots(
            workdir,
            args.old.isoformat(),
            args.new.isoformat(),
            labeler,
            force=args.force,
            progress=bar.update,
        )
    print(summary.line())
    print(summary.table())
    return 0


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``wikidrift`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="wikidrift",
        description="Growing benchmarks of real-world knowledge change from Wikipedia.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("snapshot", help="fetch, parse and store the articles of one date")
    p.add_argument("--source", choices=["api", "dump", "revisions-dir"])
    p.add_argument(
        "--input",
        help="api: endpoint URL; dump: dump directory URL or local dump file; "
        "revisions-dir: folder with revisions/<page_id>/<date>.json",
    )
    p.add_argument("--date", type=_iso_date, required=True, help="snapshot date, YYYY-MM-DD")
    p.add_argument(
        "--articles", help='title / page-id list file ("" = every article the source holds)'
    )
    p.add_argument(
        "--current-events",
        metavar="YYYY-MM[:YYYY-MM]",
        help="select the articles linked from Portal:Current events in this month range",
    )
    p.add_argument("--force", action="store_true", help="rebuild even if the snapshot exists")
    _add_common(p)
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("label", help="label sentences unchanged/changed/new/deleted")
    p.add_argument("--old", type=_iso_date, required=True, help="older snapshot date")
    p.add_argument("--new", type=_iso_date, required=True, help="newer snapshot date")
    p.add_argument(
        "--naive",
        action="store_true",
        help="reference mode: embed every sentence, compare all pairs (for benchmarks)",
    )
    p.add_argument(
        "--faithful",
        action="store_true",
        help="GrowOVER's unchanged rule exactly (no fact guard on similarity matches)",
    )
    p.add_argument("--force", action="store_true", help="relabel even if labels exist")
    _add_common(p)
    p.set_defaults(func=cmd_label)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``wikidrift`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except WikidriftError as exc:
        print(f"wikidrift: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "wikidrift: interrupted; finished work is kept, re-run the same command to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
