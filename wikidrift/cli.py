"""``wikidrift`` command line. Thin: parses arguments, loads the config, calls the library
(or, for ``run`` and ``serve``, the Prefect flows: the reason it lives outside ``pipeline/``).

Errors a user can act on are printed as one clear message (exit code 2), never a traceback:
bad input or config, a missing stage output, a full disk, a read-only workdir, a corrupt cache
database. Ctrl-C exits 130, SIGTERM 143, and the next identical command resumes where this
one stopped.

Why one long module: most of it is the argument parser of twelve commands (their flags and help
are the public contract the README documents) and the one-line error handling they share.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any, NoReturn

from pipeline.config import Config, load_config
from pipeline.errors import WikidriftError
from pipeline.layout import cache_dir, check_workdir, claim_workdir, evaluations_dir, logs_dir
from pipeline.processes import kill_descendants
from pipeline.redact import strip_credentials
from pipeline.sources import SOURCE_KINDS, SOURCE_NAMES
from pipeline.stage_folders import rebuild_advice

log = logging.getLogger("wikidrift")


def _iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date like 2024-01-01") from None


def _dates(value: str, flag: str) -> list[str]:
    """A comma-separated date list from a command's own argument, as ISO strings."""
    try:
        dates = [_iso_date(d.strip()).isoformat() for d in value.split(",") if d.strip()]
    except argparse.ArgumentTypeError as exc:
        raise WikidriftError(f"{flag}: {exc}") from None
    if not dates:
        raise WikidriftError(f"{flag}: no date in {value!r} (dates look like 2024-01-01)")
    return dates


def _int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``low..high``."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
        if number < low or (high is not None and number > high):
            allowed = f"{low}..{high}" if high is not None else f"{low} or more"
            raise argparse.ArgumentTypeError(f"{number} is out of range ({allowed})")
        return number

    return parse


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the mistake and where help is, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"wikidrift: error: {message} (see `{self.prog} --help`)\n")


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


def _load(
    args: argparse.Namespace, overrides: dict[str, Any] | None = None, *, writes: bool = True
) -> Config:
    """The config of this command (file, profile, CLI overrides); the workdir is checked for a
    newer layout, and one that a command ``writes`` into records ours."""
    overrides = dict(overrides or {})
    if getattr(args, "workdir", None) is not None:
        overrides["workdir"] = str(args.workdir)
    cfg = load_config(args.config, profile=args.profile, overrides=overrides)
    workdir = Path(cfg.workdir)
    if workdir.exists() and not workdir.is_dir():
        raise WikidriftError(f"workdir {workdir} is a file, not a folder")
    (claim_workdir if writes else check_workdir)(workdir)
    return cfg


def _output_dir(path: Path, flag: str) -> Path:
    """An output folder given on the command line: a file there is refused in one line."""
    if path.exists() and not path.is_dir():
        raise WikidriftError(f"{flag} {path} is a file, not a folder: choose another {flag}")
    return path


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
    with _console_progress():
        summary = build_snapshot(
            source,
            selection,
            args.date,
            workdir,
            splitter=splitter,
            source_description=description,
            shard_size=cfg.snapshot.shard_size,
            force=args.force,
        )
    print(summary.line())
    return 0


# --------------------------------------------------------------------------- label
def cmd_label(args: argparse.Namespace) -> int:
    """``wikidrift label``: label the sentences of snapshot --new against snapshot --old."""
    from pipeline.labeling.stage import label_snapshots, make_labeler
    from pipeline.runtime import checker_from_config, judge_from_config, llm_from_config

    overrides: dict[str, Any] = {"align": {"faithful": True}} if args.faithful else {}
    cfg = _load(args, overrides)
    workdir = Path(cfg.workdir)
    # The LLM (a local server to start when a question misses the cache) double-checks
    # contradictions (NLI path) or settles uncertain pairs (offline path).
    llm = llm_from_config(cfg, workdir)
    checker = checker_from_config(cfg, llm) if cfg.llm.verify_contradictions else None
    labeler = make_labeler(
        cfg, workdir, naive=args.naive, checker=checker, judge=judge_from_config(cfg, llm)
    )
    with _console_progress():
        summary = label_snapshots(
            workdir, args.old.isoformat(), args.new.isoformat(), labeler, force=args.force
        )
    print(summary.line())
    print(summary.table())
    return 0


# --------------------------------------------------------------------------- generate


def cmd_generate(args: argparse.Namespace) -> int:
    """``wikidrift generate``: QA, dialogues and quadruples for one snapshot."""
    from pipeline.generate.stage import generate_items
    from pipeline.layout import list_snapshots, previous_release
    from pipeline.runtime import base_embedder, cached_embedder, dry_run_line, llm_from_config

    overrides: dict[str, Any] = {}
    if args.max_cost_usd is not None:
        overrides["llm"] = {"max_cost_usd": args.max_cost_usd}
    if args.batch_api:
        overrides.setdefault("llm", {})["batch_api"] = True
    cfg = _load(args, overrides)
    workdir = Path(cfg.workdir)
    snapshot = args.snapshot.isoformat()
    previous = args.previous.isoformat() if args.previous else previous_release(workdir, snapshot)
    unreleased = [d for d in list_snapshots(workdir) if (previous or "") < d < snapshot]
    if not args.previous and unreleased:
        print(
            f"note: snapshot {unreleased[-1]} has no release; comparing {snapshot} with "
            f"{previous or 'nothing (an initial generation)'}, as `wikidrift run` would "
            f"(release it first, or pass --previous {unreleased[-1]})",
            file=sys.stderr,
        )
    embedder = cached_embedder(base_embedder(cfg), workdir)
    llm = llm_from_config(cfg, workdir, start=not args.dry_run)
    if args.dry_run:
        print(dry_run_line(cfg, workdir, snapshot, previous=previous, embedder=embedder, llm=llm))
        return 0
    with _console_progress():
        summary = generate_items(
            workdir,
            snapshot,
            previous=previous,
            backend=llm.backend,
            embedder=embedder,
            cfg=cfg.generation,
            force=args.force,
            progress=lambda msg: log.info("generate %s: %s", snapshot, msg),
        )
    print(summary.line())
    if llm.ledger is not None:
        print(f"cost_usd={llm.ledger.spent_usd:.4f}")
    return 0


# --------------------------------------------------------------------------- release
def cmd_release(args: argparse.Namespace) -> int:
    """``wikidrift release --snapshot D`` or ``wikidrift release diff D1 D2``."""
    from pipeline.layout import read_generation_summary
    from pipeline.ledger import update_ledger
    from pipeline.release import build_release, manifest_config
    from pipeline.release_diff import release_diff, release_diff_items

    if args.items and not args.action:
        raise WikidriftError("--items belongs to: wikidrift release diff D1 D2 --items")
    cfg = _load(args, writes=not args.action)
    workdir = Path(cfg.workdir)
    if args.action:
        if args.action[0] != "diff" or len(args.action) != 3:
            raise WikidriftError("usage: wikidrift release diff D1 D2 --workdir W")
        a, b = (_dates(x, "release diff")[0] for x in args.action[1:])
        diff = release_diff(workdir, a, b)
        print(f"release diff {a} -> {b}")
        for kind, d in diff.items():
            reasons = ", ".join(f"{k}={v}" for k, v in d["retired_by_reason"].items())
            print(
                f"{kind}: added={d['added']} kept={d['kept']} retired={d['retired']}"
                + (f" ({reasons})" if reasons else "")
            )
        if args.items:  # one line per id: "<kind> added|kept|retired <id>", easy to grep
            for kind, groups in release_diff_items(workdir, a, b).items():
                for status, ids in groups.items():
                    for item_id in ids:
                        print(f"{kind} {status} {item_id}")
        return 0
    if args.snapshot is None:
        raise WikidriftError("wikidrift release needs --snapshot D (or: release diff D1 D2)")
    snapshot = args.snapshot.isoformat()
    previous = read_generation_summary(workdir, snapshot).previous
    print(update_ledger(workdir, snapshot, previous).line())
    if cfg.temporal.questions:
        print(_phrase_temporal(cfg, snapshot))
    manifest = build_release(
        workdir,
        snapshot,
        config=manifest_config(cfg),
        config_hash=cfg.stable_hash(),
        new_revision=args.force,
    )
    print(manifest.line())
    return 0


def _phrase_temporal(cfg: Config, snapshot: str) -> str:
    """Run the temporal stage; the LLM (a local server, maybe) starts only if a question
    needs phrasing."""
    from pipeline.runtime import llm_from_config
    from pipeline.temporal.stage import phrase_temporal_questions

    llm = llm_from_config(cfg, cfg.workdir)  # the CLI's exit path stops a started server
    return phrase_temporal_questions(
        cfg.workdir,
        snapshot,
        llm.backend,
        max_new=cfg.temporal.max_new_questions,
        phrasing=cfg.temporal.phrasing,
        c2=cfg.temporal.c2,
    ).line()


def cmd_verify(args: argparse.Namespace) -> int:
    """``wikidrift verify --release D``: checksums, schemas and ledger invariants."""
    from pipeline.layout import read_manifest
    from pipeline.release_verify import verify_release

    cfg = _load(args, writes=False)
    snapshot = args.release.isoformat()
    read_manifest(cfg.workdir, snapshot)  # no release at all is a missing input, not a FAIL
    problems = verify_release(Path(cfg.workdir), snapshot)
    for problem in problems:
        print(f"FAIL {problem}")
    if problems:
        print(f"release {snapshot}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"release {snapshot}: OK")
    return 0


def cmd_export_hf(args: argparse.Namespace) -> int:
    """``wikidrift export-hf``: Hugging Face datasets layout (and ``--push REPO``)."""
    from pipeline.evaluate import ItemFilter
    from pipeline.export_hf import export_hf, push_to_hub

    cfg = _load(args, writes=False)
    item_filter = ItemFilter(
        created_after=args.created_after.isoformat() if args.created_after else None,
        types=_types(args.types) if args.types is not None else None,
    )
    out = export_hf(
        Path(cfg.workdir),
        args.release.isoformat(),
        _output_dir(args.out, "--out"),
        item_filter=item_filter.record(),
    )
    print(f"exported {out}")
    if args.push:
        print(f"pushed {args.push} tag {push_to_hub(out, args.push)}")
    return 0


def cmd_export_growover(args: argparse.Namespace) -> int:
    """``wikidrift export-growover``: the GrowOVER authors' JSONL layout."""
    from pipeline.export_growover import export_growover

    cfg = _load(args, writes=False)
    out = _output_dir(args.out, "--out")
    print(f"exported {export_growover(Path(cfg.workdir), args.release.isoformat(), out)}")
    return 0


# --------------------------------------------------------------------------- evaluate
def _model_overrides(spec: str | None) -> dict[str, Any]:
    """Config overrides for ``--model``: ``local``, ``openai:MODEL`` or a server URL."""
    if spec is None:
        llm: dict[str, Any] = {}
    elif spec == "local":
        llm = {"backend": "local"}
    elif spec.startswith("openai:") and spec[len("openai:") :].strip():
        llm = {"backend": "openai", "openai_model": spec[len("openai:") :].strip()}
    elif spec.startswith(("http://", "https://")):
        llm = {"backend": "openai", "base_url": spec}
    else:
        raise WikidriftError(
            f"--model {spec!r}: use local, openai:MODEL or the URL of an OpenAI-compatible server"
        )
    # One answer per request as it arrives: the Batch API would hold answers for hours.
    return {"llm": {**llm, "batch_api": False}}


def _add_filter_options(p: argparse.ArgumentParser, which: str) -> None:
    """``--created-after DATE`` and ``--types T1,T2`` (evaluate, export-hf)."""
    p.add_argument(
        "--created-after",
        type=_iso_date,
        metavar="DATE",
        help=f"{which} items made at a snapshot after DATE (timeline intervals: begun after "
        "it), e.g. a model's training cutoff",
    )
    p.add_argument(
        "--types",
        metavar="T1,T2",
        help=f"{which} items of these types: some of new,changed,unchanged (no timelines)",
    )


def _types(value: str) -> tuple[str, ...]:
    """``--types new,changed``: item types, each once, in the order given."""
    return tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``wikidrift evaluate``: score a model (with a retriever) on one or more releases."""
    from pipeline.evaluate import EVALUATED_TABLES, ItemFilter, evaluate_release
    from pipeline.evaluate import report as rep
    from pipeline.runtime import (
        cached_embedder,
        llm_from_config,
        retrieval_embedder,
        retrieval_embedder_spec,
    )

    overrides = _model_overrides(args.model)
    if args.k is not None:
        overrides["evaluate"] = {"k": args.k}
    cfg = _load(args, overrides)
    workdir = Path(cfg.workdir)
    releases = _dates(args.release, "--release")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not releases or not kinds or set(kinds) - set(EVALUATED_TABLES):
        allowed = ", ".join(EVALUATED_TABLES)
        raise WikidriftError(
            f"--release needs dates and --kinds some of {allowed} (got {args.kinds!r})"
        )
    item_filter = ItemFilter(
        created_after=args.created_after.isoformat() if args.created_after else None,
        types=_types(args.types) if args.types is not None else None,
    )
    llm = llm_from_config(cfg, workdir)
    model = rep.scored_model(llm.backend)
    dense = args.retriever in ("dense", "temporal")
    embedder = cached_embedder(retrieval_embedder(cfg), workdir) if dense else None
    config = {
        "profile": cfg.profile,
        "config_hash": cfg.stable_hash(),
        "embedder": retrieval_embedder_spec(cfg) if dense else None,
        "evaluate": cfg.evaluate.model_dump(mode="json"),
    }
    if args.out is not None:
        _output_dir(args.out, "--out")
    incomplete = 0
    for release in releases:
        with _console_progress():
            run = evaluate_release(
                workdir,
                release,
                backend=llm.backend,
                retriever=args.retriever,
                embedder=embedder,
                kinds=kinds,
                limit=args.limit,
                settings=cfg.evaluate,
                item_filter=item_filter,
            )
        done = rep.record_run(
            workdir,
            run,
            model=model,
            model_spec=args.model or "",
            config=config,
            limit=args.limit,
            out=args.out,
            per_release=len(releases) > 1,
        )
        for kind, why in run.skipped.items():
            print(f"skipped {kind}: {why}")
        print(rep.results_table([done.record]), end="")
        print(
            f"release {release}: {len(run.predictions)} items, "
            f"{run.model_calls} model calls, {run.cache_hits} cache hits, "
            f"{run.seconds:.1f}s -> {done.out}"
        )
        incomplete += run.failed
        if done.plot is not None:
            print(f"plot {done.plot}")
    if incomplete:
        print(
            f"wikidrift: {incomplete} model call(s) failed (see 'error' in predictions.jsonl) "
            "and count as wrong; run the same command again to retry them",
            file=sys.stderr,
        )
        return 1
    print(f"leaderboard {evaluations_dir(workdir) / 'leaderboard.md'}")
    return 0


# --------------------------------------------------------------------------- annotate
def cmd_annotate(args: argparse.Namespace) -> int:
    """``wikidrift annotate sample|serve|report``: human validation of sentence labels."""
    cfg = _load(args)
    workdir = Path(cfg.workdir)
    release = args.release.isoformat()
    root = args.annotations_dir
    if root is not None:
        _output_dir(root, "--annotations-dir")
    if args.annotate_action == "sample":
        from pipeline.annotate.sample import sample_tasks

        summary = sample_tasks(
            workdir,
            release,
            per_label=args.per_label,
            seed=args.seed,
            include_qa=args.include_qa,
            annotations_root=root,
            force=args.force,
        )
        print("\n".join(summary.lines()))
        return 0
    if args.annotate_action == "serve":
        from pipeline.annotate.server import AnnotationServer

        server = AnnotationServer(
            workdir, release, annotations_root=root, host=args.host, port=args.port
        )
        n = len(server.store.tasks)
        # flush: a parent process (or a test) reads the URL from a pipe.
        print(f"annotating release {release}: {n} tasks at {server.url} (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped; every judgment is already saved", file=sys.stderr)
        finally:
            server.stop()
        return 0
    from pipeline.annotate.report import write_report

    text, path = write_report(workdir, release, annotations_root=root, min_raters=args.min_raters)
    print(text)
    print(f"saved {path}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- run / serve
def _run_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = _snapshot_overrides(args)
    if args.dates is not None:
        overrides.setdefault("snapshot", {})["dates"] = _dates(args.dates, "--dates")
    flow: dict[str, Any] = {}
    if args.task_runner:
        flow["task_runner"] = args.task_runner
    if args.dask_address:
        flow["task_runner"] = "dask"
        flow["dask_address"] = args.dask_address
    if args.export_hf:
        flow["export_hf_dir"] = str(args.export_hf)
    if flow:
        overrides["flow"] = flow
    if args.faithful:
        overrides["align"] = {"faithful": True}
    if args.max_cost_usd is not None:
        overrides["llm"] = {"max_cost_usd": args.max_cost_usd}
    return overrides


def cmd_run(args: argparse.Namespace) -> int:
    """``wikidrift run``: the monthly flow for every configured snapshot date, in order."""
    from flows.runner import configure_prefect

    cfg = _load(args, _run_overrides(args))
    if not cfg.snapshot.dates:
        raise WikidriftError("no snapshot dates: set snapshot.dates in the config or --dates")
    workdir = Path(cfg.workdir)
    dates = [d.isoformat() for d in cfg.snapshot.dates]
    log_path = None if args.verbose else _log_to_file(logs_dir(workdir) / "run.log")
    configure_prefect(log_path)
    from flows.prefect_server import start_prefect_server

    # our own Prefect server, which dies with this command (Prefect's would outlive a kill -9)
    start_prefect_server(logs_dir(workdir) / "prefect-server.log")
    print(
        f"wikidrift run: {len(dates)} release(s) {', '.join(dates)} into {workdir}/"
        + (f" (details: {log_path})" if log_path else ""),
        file=sys.stderr,
    )
    from flows.monthly import run_flow, start_llm_before_first_use
    from flows.runner import task_runner

    if cfg.flow.task_runner == "dask":
        # Dask's worker processes start with the flow: they share the server only if it runs
        # before them (each would otherwise load a model of its own).
        _start_llm_for(cfg, workdir)
    else:  # after the first snapshot, which may fail first (offline, a bad source)
        start_llm_before_first_use(lambda: _start_llm_for(cfg, workdir))
    try:
        with _console_progress():
            results = run_flow.with_options(task_runner=task_runner(cfg))(
                dates=dates, config=cfg.model_dump(mode="json")
            )
    finally:
        start_llm_before_first_use(None)
    from pipeline.release_card import run_summary

    print(run_summary(workdir, sorted(results)))
    return 0


def _log_to_file(path: Path) -> Path:
    """Send every log record (ours, Prefect's, its temporary server's) to ``path`` instead of
    the console, where only progress bars, one-line errors and the summary go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return path


def _start_llm_for(cfg: Config, workdir: Path) -> None:
    """Start the local LLM server when generation will need it (before the first stage that
    may ask it; before the flow on Dask), so every worker shares one server."""
    from pipeline import progress
    from pipeline.runtime import local_llm, resolve_llm_kind

    if resolve_llm_kind(cfg) != "local" or not cfg.generation.makes_items:
        return
    # progress.note, not print: called inside the flow too, where print() becomes a log record
    progress.note(f"starting the local LLM ({cfg.llm.local_model}) ...")
    backend = local_llm(cfg, workdir)
    server = backend.server
    took = f" in {server.load_seconds:.0f}s" if server is not None else ""
    progress.note(
        f"local LLM {backend.model} ready at {backend.base_url}{took} "
        f"({cfg.llm.local_parallel} parallel slots; log: {logs_dir(workdir)}/llama-server.log)"
    )


@contextlib.contextmanager
def _console_progress() -> Iterator[None]:
    from pipeline import progress

    reporter = progress.ConsoleProgress()
    progress.set_reporter(reporter)
    finished = False
    try:
        yield
        finished = True
    finally:
        progress.set_reporter(None)
        reporter.close(finished=finished)


def cmd_serve(args: argparse.Namespace) -> int:
    """``wikidrift serve``: a deployment that runs the monthly flow on a cron schedule."""
    from flows.runner import configure_prefect

    overrides: dict[str, Any] = {"flow": {"cron": args.cron}} if args.cron else {}
    cfg = _load(args, overrides)
    configure_prefect()
    from flows.monthly import monthly_flow

    print(f"serving deployment wikidrift-monthly (cron {cfg.flow.cron!r}); Ctrl-C stops")
    try:
        monthly_flow.serve(
            name="wikidrift-monthly",
            cron=cfg.flow.cron,
            parameters={"config": cfg.model_dump(mode="json")},
        )
    except SystemExit as exc:
        # Prefect's runner answers SIGTERM with a graceful stop and sys.exit(0) (its only
        # exit): report it like every other command does (one line, exit 143).
        if exc.code in (0, None):
            raise Terminated from None
        raise
    return 0


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``wikidrift`` subcommand."""
    parser = _Parser(
        prog="wikidrift",
        description="Growing benchmarks of real-world knowledge change from Wikipedia.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("snapshot", help="fetch, parse and store the articles of one date")
    p.add_argument("--source", choices=SOURCE_NAMES)
    p.add_argument("--input", help="; ".join(f"{k.name}: {k.input_help}" for k in SOURCE_KINDS))
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

    p = sub.add_parser("run", help="the main job: a release for every configured date")
    p.add_argument("--source", choices=SOURCE_NAMES)
    p.add_argument("--input", help="as for `wikidrift snapshot`")
    p.add_argument("--dates", help="comma-separated snapshot dates, e.g. 2024-01-01,2024-06-01")
    p.add_argument("--articles", help='title / page-id list file ("" = all the source holds)')
    p.add_argument("--current-events", metavar="YYYY-MM[:YYYY-MM]")
    p.add_argument("--task-runner", choices=["threads", "dask"])
    p.add_argument("--dask-address", help="tcp://host:port of an existing Dask scheduler")
    p.add_argument("--export-hf", type=Path, help="also export each release here")
    p.add_argument("--faithful", action="store_true", help="GrowOVER's unchanged rule exactly")
    p.add_argument("--max-cost-usd", type=float, help="stop before spending more on the LLM")
    _add_common(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("serve", help="run the monthly flow on a schedule (Prefect deployment)")
    p.add_argument("--cron", help='cron schedule (default from config: "0 6 21 * *")')
    _add_common(p, workdir_required=False)
    p.set_defaults(func=cmd_serve)

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

    p = sub.add_parser("generate", help="generate QA, dialogues and quadruples for a snapshot")
    p.add_argument("--snapshot", type=_iso_date, required=True)
    p.add_argument(
        "--previous", type=_iso_date, help="snapshot to compare with (default: the latest release)"
    )
    p.add_argument("--dry-run", action="store_true", help="estimate requests, tokens and cost")
    p.add_argument("--max-cost-usd", type=float, help="stop before spending more than this")
    p.add_argument("--batch-api", action="store_true", help="OpenAI Batch API (50%% cheaper)")
    p.add_argument("--force", action="store_true", help="regenerate even if done")
    _add_common(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser(
        "release",
        help="write the release of a snapshot (or: release diff D1 D2)",
        usage="wikidrift release --snapshot D --workdir W | "
        "release diff D1 D2 --workdir W [--items]",
    )
    p.add_argument("action", nargs="*", help="diff D1 D2")
    p.add_argument(
        "--items",
        action="store_true",
        help="release diff: also print the ids added / kept / retired, one per line",
    )
    p.add_argument("--snapshot", type=_iso_date)
    p.add_argument(
        "--force", action="store_true", help="write a new revision (the old one is kept)"
    )
    _add_common(p)
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("verify", help="check a release: checksums, schemas, ledger invariants")
    p.add_argument("--release", type=_iso_date, required=True)
    _add_common(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("export-hf", help="Hugging Face datasets layout of a release")
    p.add_argument("--release", type=_iso_date, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--push", metavar="REPO", help="upload to this dataset repo and tag it")
    _add_filter_options(p, "the lm-eval tasks score only")
    _add_common(p)
    p.set_defaults(func=cmd_export_hf)

    p = sub.add_parser("export-growover", help="GrowOVER's JSONL layout of a release")
    p.add_argument("--release", type=_iso_date, required=True)
    p.add_argument("--out", type=Path, required=True)
    _add_common(p)
    p.set_defaults(func=cmd_export_growover)

    p = sub.add_parser(
        "evaluate", help="score a model (+ retriever) on releases: F1, BLEU, outdated rate"
    )
    p.add_argument(
        "--release", required=True, help="release date, or several: 2024-06-01,2025-01-01"
    )
    p.add_argument(
        "--model",
        help="local (the llama.cpp model), openai:MODEL, or an OpenAI-compatible server URL "
        "(default: the configured LLM)",
    )
    p.add_argument(
        "--retriever",
        choices=["none", "bm25", "dense", "temporal"],
        default="none",
        help="none = closed book; temporal = dense with outdated passages ranked down",
    )
    p.add_argument(
        "--k",
        type=_int_at_least(1),
        help="passages per question (default: evaluate.k of the config, 3)",
    )
    p.add_argument(
        "--kinds",
        default="qa,dialogue,temporal_qa,timelines",
        help="comma-separated item kinds (default: all; kinds a release lacks are skipped)",
    )
    p.add_argument("--limit", type=_int_at_least(1), help="only the first N items of each kind")
    _add_filter_options(p, "only")
    p.add_argument(
        "--out",
        type=Path,
        help="results folder (default: <workdir>/evaluations/<release>/<model>__<retriever>"
        "[__after-DATE][__types-T1-T2])",
    )
    _add_common(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "annotate",
        help="human validation of sentence labels: sample tasks, serve the page, report",
    )
    actions = p.add_subparsers(dest="annotate_action", required=True, metavar="ACTION")
    a = actions.add_parser("sample", help="draw the tasks: new and changed sentences (+ QA)")
    a.add_argument(
        "--per-label", type=_int_at_least(1), default=30, help="sentences per label (default 30)"
    )
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument(
        "--include-qa", type=_int_at_least(0), default=0, metavar="N", help="also N QA items"
    )
    a.add_argument("--force", action="store_true", help="replace tasks that already have judgments")
    b = actions.add_parser("serve", help="the local annotation web page")
    b.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    b.add_argument(
        "--port",
        type=_int_at_least(0, 65535),
        default=8765,
        help="port (default 8765; 0 = any free)",
    )
    c = actions.add_parser("report", help="majority vote, accuracy (GrowOVER Table 12), kappa")
    c.add_argument(
        "--min-raters",
        type=_int_at_least(1),
        default=1,
        help="score tasks with at least this many raters",
    )
    for action in (a, b, c):
        action.add_argument("--release", type=_iso_date, required=True, help="release date")
        action.add_argument(
            "--annotations-dir",
            type=Path,
            help="root of the annotation folders (default: <workdir>/annotations)",
        )
        _add_common(action)
        action.set_defaults(func=cmd_annotate)
    return parser


class Terminated(BaseException):
    """SIGTERM arrived (a scheduler stopping the job): unwind like Ctrl-C, then exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def _in_worker_thread(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run the command in a worker thread while the main thread only waits, so SIGTERM and
    Ctrl-C are handled at once, whatever the command is doing: Prefect's flow engine installs
    its own SIGTERM handler in the main thread (and then waits for every running task), and a
    thread pool's exit waits for requests in flight. The command's exception is raised here."""
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["code"] = func(args)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread as is
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="wikidrift-command", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return int(outcome["code"])  # type: ignore[call-overload]


def _stop_servers(at_once: bool = False) -> None:
    """Stop the local LLM server this command started (idempotent); ``at_once`` (a stop on a
    signal) kills it and the Prefect server without a grace period. Otherwise the Prefect
    server stops at exit, after Prefect has sent its last log records to it (its exit handler
    runs after Prefect's)."""
    from flows.prefect_server import stop_prefect_server
    from pipeline.models.llm.llamacpp_server import stop_shared_servers

    if at_once:
        stop_shared_servers(0)
        stop_prefect_server(0)
    else:
        stop_shared_servers()


_STOPPED = "finished work is kept, re-run the same command to resume"


def _stop(code: int, message: str, exit_now: bool) -> int:
    """Say why we stop, kill the servers, and (``exit_now``, or worker threads still busy)
    exit at once: what the workers finished is saved, what they did not is redone by the next
    identical command, and Prefect's exit handlers would only wait on the killed server."""
    print(f"wikidrift: {message}", file=sys.stderr)
    _stop_servers(at_once=True)
    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if (exit_now or busy) and threading.current_thread() is threading.main_thread():
        _exit_at_once(code)
    return code


def _exit_at_once(code: int) -> NoReturn:
    """Flush the console, kill every child process and exit without exit handlers."""
    sys.stdout.flush()
    sys.stderr.flush()
    kill_descendants()
    os._exit(code)


def _on_late_signal(signum: int, frame: object) -> None:
    """A signal after the command's work, while it stops its servers or Prefect sends its
    last logs: nothing is left to keep, so exit at once (143 / 130) rather than wait."""
    # No lock is taken here (the interrupted frame may hold the server registry's): every
    # child process is killed by pid.
    print(f"wikidrift: {signal.Signals(signum).name} while finishing; {_STOPPED}", file=sys.stderr)
    _exit_at_once(130 if signum == signal.SIGINT else 143)


class _ProcessExit:
    """The console script's last exit handler (registered before any other, so it runs after
    them all): exit with the command's code without Python's teardown, which puts the default
    signal handlers back while it unloads modules, so that a SIGTERM then would kill the
    process (-15) instead of exiting 143."""

    code = 1  # until main() returns one (an exception escaped it: 1, like Python)

    def __call__(self) -> None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(self.code)


_process_exit = _ProcessExit()


_RESUME = "run the same command again to resume (finished work is kept)"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _os_error(exc: OSError) -> str | None:
    """One line for a file-system failure a user can fix, or None for any other OSError."""
    where = exc.filename or ""
    if exc.filename2:
        where = f"{where} -> {exc.filename2}"
    reason = exc.strerror or str(exc)
    if exc.errno in _NO_SPACE:
        return f"{reason}{f' writing {where}' if where else ''}: free some space, then {_RESUME}"
    if exc.errno in _NOT_WRITABLE:
        return (
            f"{reason}{f': {where}' if where else ''} (is the workdir read-only or another "
            f"user's?): make it writable, then {_RESUME}"
        )
    if isinstance(exc, FileNotFoundError):
        return f"missing file {where or reason}: run the stage that writes it first"
    if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.EEXIST):
        return (
            f"{reason}{f': {where}' if where else ''}: a file stands where a folder goes (or "
            "the other way round); move it or choose another path"
        )
    return None


def _database_error(exc: sqlite3.DatabaseError, args: argparse.Namespace) -> str:
    """One line for an SQLite failure: which cache file is damaged and what to do."""
    text = str(exc)
    if "disk is full" in text or "disk I/O error" in text:
        return f"cache database: {text}: free some space, then {_RESUME}"
    if "readonly" in text or "unable to open" in text:
        return (
            f"cache database: {text} (is the workdir read-only?): make it writable, then {_RESUME}"
        )
    workdir = getattr(args, "workdir", None)
    damaged = _damaged_databases(cache_dir(workdir, create=False)) if workdir is not None else []
    if damaged:
        names = ", ".join(str(p) for p in damaged)
        return (
            f"corrupt cache database {names} ({text}): it is only a cache, delete it and {_RESUME}"
        )
    return f"a cache database is unusable ({text}): delete the damaged file and {_RESUME}"


def _damaged_databases(folder: Path) -> list[Path]:
    """The SQLite files in ``folder`` whose header is not SQLite's."""
    damaged = []
    for path in sorted(folder.glob("**/*.sqlite")):
        try:
            with path.open("rb") as fh:
                head = fh.read(16)
        except OSError:
            continue
        if head and head != b"SQLite format 3\x00":
            damaged.append(path)
    return damaged


def _internal_error(exc: Exception, args: argparse.Namespace) -> int:
    """An error no user input explains: one line (exit 1), or with ``-v`` the traceback."""
    if args.verbose:
        raise exc
    what = " ".join(str(exc).split())[:300]
    print(
        f"wikidrift: internal error: {type(exc).__name__}: {strip_credentials(what)} "
        "(a bug: run again with -v for the traceback and report it)",
        file=sys.stderr,
    )
    return 1


# Commands that serve until stopped, with their own signal handling (Prefect's runner, the
# annotation page's HTTP server): they keep the main thread.
_MAIN_THREAD_COMMANDS: frozenset[Callable[[argparse.Namespace], int]] = frozenset(
    {cmd_serve, cmd_annotate}
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``wikidrift`` console script (``argv``: the command line without the
    program name; None: ``sys.argv``)."""
    owns_process = argv is None and threading.current_thread() is threading.main_thread()
    if owns_process:
        atexit.register(_process_exit)
    try:
        _process_exit.code = _main(argv)
    except SystemExit as exc:  # a library's sys.exit: keep its code
        _process_exit.code = exc.code if isinstance(exc.code, int) else 1
        raise
    except (Terminated, KeyboardInterrupt) as exc:  # came as the command was finishing
        code = 143 if isinstance(exc, Terminated) else 130
        name = "SIGTERM" if code == 143 else "SIGINT"
        _process_exit.code = _stop(code, f"{name} while finishing; {_STOPPED}", owns_process)
    return _process_exit.code


def _main(argv: Sequence[str] | None) -> int:
    """Parse, run the command (in a worker thread unless it serves), turn each kind of error
    into one line and an exit code, and handle SIGTERM / Ctrl-C."""
    # Library progress bars (model loading) would tear the CLI's own bars apart.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a bad argument already said in one line
        return exc.code if isinstance(exc.code, int) else 2
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func: Callable[[argparse.Namespace], int] = args.func
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main_thread else None
    # The console script (no argv given) owns the process until it exits; a caller that
    # passes argv (a test, a notebook) gets its signal handlers back and is never exited.
    owns_process = argv is None and in_main_thread
    try:
        if in_main_thread and func not in _MAIN_THREAD_COMMANDS:
            return _in_worker_thread(func, args)
        return func(args)
    except WikidriftError as exc:
        message = f"{exc}{rebuild_advice(exc)}"
        print(f"wikidrift: error: {strip_credentials(message)}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as exc:
        print(f"wikidrift: error: {_database_error(exc, args)}", file=sys.stderr)
        return 2
    except OSError as exc:
        message = _os_error(exc)
        if message is None:
            return _internal_error(exc, args)
        print(f"wikidrift: error: {message}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback with -v
        return _internal_error(exc, args)
    except KeyboardInterrupt:
        return _stop(130, f"interrupted; {_STOPPED}", owns_process)
    except Terminated:
        return _stop(143, f"terminated; {_STOPPED}", owns_process)
    finally:
        if in_main_thread:
            previous_int = signal.signal(signal.SIGINT, _on_late_signal)
            signal.signal(signal.SIGTERM, _on_late_signal)
        _stop_servers()
        if in_main_thread and not owns_process:
            signal.signal(signal.SIGINT, previous_int)
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())
