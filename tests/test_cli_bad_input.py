"""Every bad input a user can give the command line, one row each: malformed dates and date
lists, wrong arguments, bad configs, missing, unreadable or damaged files of every stage,
output paths that are files or read-only, and a workdir written by a newer wikidrift.

Each row must end in exactly one line on stderr, ``wikidrift: error: ...``, exit code 2 and no
traceback; rows about a damaged or missing file name the file and the command that rebuilds
it, and then that command is run and the first command succeeds: nothing is lost.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.layout import VERSION_FILE
from pipeline.storage import file_sha256, write_parquet_atomic
from tests.conftest import (
    STAGE_DATES,
    STAGE_PAGE_IDS,
    WIKISNAP,
    copy_workdir,
    read_only,
    scripted_config_file,
)
from wikidrift.cli import main

A, B, C = STAGE_DATES

# The export rows load the dense retriever's embedder: the session's cached one.
pytestmark = pytest.mark.usefixtures("exports_share_the_session_embedder")


@dataclass
class Ctx:
    """What a row builds its arguments from."""

    workdir: Path  # a private copy of the released workdir (three releases)
    tmp: Path  # a scratch folder
    common: list[str]  # --workdir W --profile offline --config <the workdir's config>


@dataclass
class Row:
    """One bad input: ``setup`` damages the copy, ``args`` is the command that must fail in
    one line naming every ``needle``; then each ``then`` command must exit with its code."""

    id: str
    args: Callable[[Ctx], list[str]]
    needles: tuple[str, ...] = ()
    setup: Callable[[Ctx], None] | None = None
    then: list[tuple[Callable[[Ctx], list[str]], int]] = field(default_factory=list)


def _garbage(path: Path) -> Callable[[Ctx], None]:
    def damage(ctx: Ctx) -> None:
        target = ctx.workdir / path
        assert target.exists(), target
        target.write_bytes(b"this is not what wikidrift wrote " * 40)

    return damage


def _drop_a_digest(ctx: Ctx) -> None:
    """A manifest that parses but lists a file without its sha256."""
    path = ctx.workdir / "releases" / B / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["files"]["qa.parquet"]["sha256"]
    path.write_text(json.dumps(manifest))


def _snapshot_args(ctx: Ctx, date: str) -> list[str]:
    articles = ctx.tmp / "articles.txt"
    articles.write_text("".join(f"{p}\n" for p in STAGE_PAGE_IDS))
    return ["snapshot", "--date", date, "--source", "revisions-dir", "--input", str(WIKISNAP)] + [
        "--articles",
        str(articles),
        *ctx.common,
    ]


def _newer_table(ctx: Ctx) -> None:
    """sentences.parquet of B as a newer wikidrift would leave it: schema version 99, and
    recorded as such in the snapshot's marker."""
    folder = ctx.workdir / "snapshots" / B
    table = pq.read_table(folder / "sentences.parquet")
    write_parquet_atomic(
        table.replace_schema_metadata({}),
        folder / "sentences.parquet",
        table_name="sentences",
        schema_version=99,
    )
    marker = json.loads((folder / "snapshot.json").read_text())
    marker["outputs"]["sentences.parquet"] = file_sha256(folder / "sentences.parquet")
    (folder / "snapshot.json").write_text(json.dumps(marker))


def _newer_workdir(ctx: Ctx) -> None:
    (ctx.workdir / VERSION_FILE).write_text(
        json.dumps({"workdir_version": 99, "written_by": "wikidrift 9.0.0"})
    )


def _write(name: str, text: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        (ctx.tmp / name).write_text(text)

    return setup


def _label(ctx: Ctx, old: str = A, new: str = B) -> list[str]:
    return ["label", "--old", old, "--new", new, *ctx.common]


def _release(date: str, *extra: str) -> Callable[[Ctx], list[str]]:
    return lambda ctx: ["release", "--snapshot", date, *extra, *ctx.common]


def _export(ctx: Ctx) -> list[str]:
    return ["export-hf", "--release", B, "--out", str(ctx.tmp / "hf"), *ctx.common]


def _w(ctx: Ctx) -> list[str]:
    return ctx.common


def _config(name: str) -> Callable[[Ctx], list[str]]:
    """``verify`` with the config file ``name`` of the scratch folder (no --profile)."""
    return lambda c: (
        ["verify", "--release", B, "--workdir", str(c.workdir)]
        + [
            "--config",
            str(c.tmp / name),
        ]
    )


ROWS = [
    # ---- dates and date lists
    Row("snapshot-date", lambda c: ["snapshot", "--date", "2024-13-01", *_w(c)], ("2024-13-01",)),
    Row("label-date", lambda c: ["label", "--old", "2024-02-30", "--new", B, *_w(c)], ("--old",)),
    Row("generate-date", lambda c: ["generate", "--snapshot", "24-1-1", *_w(c)], ("24-1-1",)),
    Row("release-date", lambda c: ["release", "--snapshot", "2024/01/01", *_w(c)], ("--snapshot",)),
    Row("verify-date", lambda c: ["verify", "--release", "tomorrow", *_w(c)], ("tomorrow",)),
    Row(
        "export-date",
        lambda c: ["export-hf", "--release", "x", "--out", str(c.tmp / "o"), *_w(c)],
        ("--release",),
    ),
    Row(
        "annotate-date",
        lambda c: ["annotate", "sample", "--release", "2024-00-01", *_w(c)],
        ("2024-00-01",),
    ),
    Row("run-dates", lambda c: ["run", "--dates", f"{A},2024-13-01", *_w(c)], ("--dates",)),
    Row("run-dates-order", lambda c: ["run", "--dates", f"{C},{A}", *_w(c)], ("ascending",)),
    Row("run-dates-empty", lambda c: ["run", "--dates", " , ", *_w(c)], ("no date",)),
    Row("diff-date", lambda c: ["release", "diff", A, "2024-1-32", *_w(c)], ("release diff",)),
    Row("diff-arity", lambda c: ["release", "diff", A, *_w(c)], ("usage",)),
    Row("evaluate-dates", lambda c: ["evaluate", "--release", f"{B},soon", *_w(c)], ("--release",)),
    # ---- other arguments
    Row("unknown-command", lambda c: ["bogus"], ("bogus",)),
    Row("missing-required", lambda c: ["label", "--old", A, *_w(c)], ("--new",)),
    Row("bad-choice", lambda c: ["snapshot", "--date", A, "--source", "ftp", *_w(c)], ("ftp",)),
    Row(
        "evaluate-kind",
        lambda c: ["evaluate", "--release", B, "--kinds", "qa,poems", *_w(c)],
        ("--kinds",),
    ),
    Row(
        "evaluate-model", lambda c: ["evaluate", "--release", B, "--model", "gpt", *_w(c)], ("gpt",)
    ),
    Row("evaluate-k", lambda c: ["evaluate", "--release", B, "--k", "0", *_w(c)], ("--k",)),
    Row(
        "evaluate-limit",
        lambda c: ["evaluate", "--release", B, "--limit", "-3", *_w(c)],
        ("--limit",),
    ),
    Row(
        "max-cost",
        lambda c: ["generate", "--snapshot", B, "--max-cost-usd", "-1", *_w(c)],
        ("max_cost_usd",),
    ),
    Row(
        "current-events",
        lambda c: ["snapshot", "--date", A, "--current-events", "2023-13", *_w(c)],
        ("2023-13",),
    ),
    Row(
        "source-folder-missing",
        lambda c: [
            "snapshot",
            "--date",
            A,
            "--source",
            "revisions-dir",
            "--input",
            str(c.tmp / "nowhere"),
            *_w(c),
        ],
        ("nowhere",),
    ),
    Row(
        "article-list-missing",
        lambda c: (
            ["snapshot", "--date", A, "--source", "revisions-dir", "--input"]
            + [str(WIKISNAP), "--articles", str(c.tmp / "no.txt"), *c.common]
        ),
        ("no.txt",),
    ),
    Row(
        "annotate-per-label",
        lambda c: ["annotate", "sample", "--release", B, "--per-label", "0", *_w(c)],
        ("--per-label",),
    ),
    Row(
        "annotate-port",
        lambda c: ["annotate", "serve", "--release", B, "--port", "70000", *_w(c)],
        ("--port",),
    ),
    Row(
        "serve-cron",
        lambda c: ["serve", "--cron", "0 6 32 * *", *_w(c)],
        ("flow.cron", "Bad day-of-month"),
    ),
    # ---- configuration
    Row(
        "config-type",
        _config("bad.toml"),
        ("align.unchanged_threshold = 'high'", "valid number"),
        setup=_write("bad.toml", '[align]\nunchanged_threshold = "high"\n'),
    ),
    Row(
        "config-unknown-key",
        _config("bad.toml"),
        ("align.threshold", "unknown key"),
        setup=_write("bad.toml", "[align]\nthreshold = 0.9\n"),
    ),
    Row(
        "config-not-toml",
        _config("bad.toml"),
        ("not valid TOML",),
        setup=_write("bad.toml", "[align\nthis is = = not toml\n"),
    ),
    Row(
        "config-profile",
        _config("bad.toml"),
        ("profile = 'fast'",),
        setup=_write("bad.toml", 'profile = "fast"\n'),
    ),
    Row(
        "config-missing",
        _config("none.toml"),
        ("config file not found",),
    ),
    Row(
        "config-is-a-folder",
        _config("."),
        ("cannot be read",),
    ),
    # ---- output paths
    Row(
        "workdir-is-a-file",
        lambda c: ["verify", "--release", B, "--workdir", str(c.tmp / "f"), *_w(c)[2:]],
        ("is a file",),
        setup=_write("f", "x"),
    ),
    Row(
        "export-out-is-a-file",
        lambda c: ["export-hf", "--release", B, "--out", str(c.tmp / "f"), *_w(c)],
        ("--out", "is a file"),
        setup=_write("f", "x"),
    ),
    Row(
        "growover-out-is-a-file",
        lambda c: ["export-growover", "--release", B, "--out", str(c.tmp / "f"), *_w(c)],
        ("--out", "is a file"),
        setup=_write("f", "x"),
    ),
    Row(
        "evaluate-out-is-a-file",
        lambda c: ["evaluate", "--release", B, "--out", str(c.tmp / "f"), *_w(c)],
        ("--out", "is a file"),
        setup=_write("f", "x"),
    ),
    Row(
        "annotations-dir-is-a-file",
        lambda c: (
            ["annotate", "sample", "--release", B, "--annotations-dir", str(c.tmp / "f")] + c.common
        ),
        ("--annotations-dir", "is a file"),
        setup=_write("f", "x"),
    ),
    # ---- missing stage outputs
    Row(
        "missing-snapshot",
        lambda c: _label(c),
        ("snapshots/2024-06-01/articles.parquet is missing", "wikidrift snapshot --date"),
        setup=lambda c: shutil.rmtree(c.workdir / "snapshots" / B),
        then=[(lambda c: _snapshot_args(c, B), 0), (_label, 0)],
    ),
    Row(
        "missing-labels",
        lambda c: ["generate", "--snapshot", B, "--previous", A, *c.common],
        ("no labels 2024-01-01 -> 2024-06-01", "wikidrift label"),
        setup=lambda c: shutil.rmtree(c.workdir / "labels" / f"{A}__{B}"),
        then=[(_label, 0), (lambda c: ["generate", "--snapshot", B, *c.common], 0)],
    ),
    Row(
        "missing-generated",
        _release(B),
        ("no generation run for 2024-06-01",),
        setup=lambda c: shutil.rmtree(c.workdir / "generated" / B),
    ),
    Row(
        "missing-release-verify",
        lambda c: ["verify", "--release", "2030-01-01", *_w(c)],
        ("no release",),
    ),
    Row(
        "missing-release-export",
        lambda c: ["export-hf", "--release", "2030-01-01", "--out", str(c.tmp / "o"), *_w(c)],
        ("2030-01-01",),
    ),
    Row(
        "missing-release-growover",
        lambda c: (
            ["export-growover", "--release", "2030-01-01", "--out", str(c.tmp / "o")] + c.common
        ),
        ("2030-01-01",),
    ),
    Row(
        "missing-release-annotate",
        lambda c: ["annotate", "sample", "--release", "2030-01-01", *_w(c)],
        ("2030-01-01",),
    ),
    Row(
        "missing-release-evaluate",
        lambda c: ["evaluate", "--release", "2030-01-01", *_w(c)],
        ("2030-01-01",),
    ),
    Row(
        "missing-release-diff",
        lambda c: ["release", "diff", A, "2030-01-01", *_w(c)],
        ("2030-01-01",),
    ),
    Row(
        "missing-release-table",
        _export,
        ("releases/2024-06-01/qa.parquet is missing", "wikidrift release --snapshot 2024-06-01"),
        setup=lambda c: (c.workdir / "releases" / B / "qa.parquet").unlink(),
        then=[(_release(B, "--force"), 0), (_export, 0)],
    ),
    # ---- damaged files, stage by stage
    Row(
        "damaged-snapshot-table",
        _label,
        ("snapshots/2024-06-01/sentences.parquet", "wikidrift snapshot --date 2024-06-01"),
        setup=_garbage(Path("snapshots", B, "sentences.parquet")),
        then=[(lambda c: _snapshot_args(c, B), 0), (_label, 0)],
    ),
    Row(
        "damaged-snapshot-articles",
        lambda c: ["generate", "--snapshot", B, *c.common],
        ("snapshots/2024-06-01/articles.parquet", "wikidrift snapshot --date 2024-06-01"),
        setup=_garbage(Path("snapshots", B, "articles.parquet")),
        then=[(lambda c: _snapshot_args(c, B), 0), (_label, 0)],
    ),
    Row(
        "damaged-labels",
        lambda c: ["generate", "--snapshot", B, *c.common],
        ("labels/2024-01-01__2024-06-01/sentence_labels.parquet", "wikidrift label --old"),
        setup=_garbage(Path("labels", f"{A}__{B}", "sentence_labels.parquet")),
        then=[(_label, 0), (lambda c: ["generate", "--snapshot", B, *c.common], 0)],
    ),
    Row(
        "damaged-label-summary",
        _release(B, "--force"),
        ("labels/2024-01-01__2024-06-01/summary.json", "wikidrift label --old"),
        setup=_garbage(Path("labels", f"{A}__{B}", "summary.json")),
        then=[(_label, 0), (_release(B, "--force"), 0)],
    ),
    Row(
        "damaged-generated",
        _release(B),
        ("generated/2024-06-01/qa.parquet", "wikidrift generate --snapshot 2024-06-01"),
        setup=_garbage(Path("generated", B, "qa.parquet")),
        then=[(lambda c: ["generate", "--snapshot", B, *c.common], 0), (_release(B), 0)],
    ),
    Row(
        "damaged-generation-marker",
        _release(B),
        ("generated/2024-06-01/run.json", "wikidrift generate --snapshot 2024-06-01"),
        setup=_garbage(Path("generated", B, "run.json")),
        then=[(lambda c: ["generate", "--snapshot", B, *c.common], 0), (_release(B), 0)],
    ),
    Row(
        "damaged-ledger",
        _release(C),
        ("ledger/2024-06-01/items.parquet", "wikidrift release --snapshot 2024-06-01"),
        setup=_garbage(Path("ledger", B, "items.parquet")),
        then=[(_release(B), 0), (_release(C), 0)],
    ),
    Row(
        "damaged-ledger-marker",
        _release(C),
        ("ledger/2024-06-01/state.json", "wikidrift release --snapshot 2024-06-01"),
        setup=_garbage(Path("ledger", B, "state.json")),
        then=[(_release(B), 0), (_release(C), 0)],
    ),
    Row(
        "damaged-temporal",
        _release(C),
        ("temporal/2024-06-01/questions.parquet", "wikidrift release --snapshot 2024-06-01"),
        setup=_garbage(Path("temporal", B, "questions.parquet")),
        then=[(_release(B), 0), (_release(C), 0)],
    ),
    Row(
        "damaged-release-table",
        _export,
        ("releases/2024-06-01/qa.parquet", "wikidrift release --snapshot 2024-06-01", "--force"),
        setup=_garbage(Path("releases", B, "qa.parquet")),
        then=[(_release(B, "--force"), 0), (_export, 0)],
    ),
    Row(
        "damaged-release-manifest",
        _export,
        ("releases/2024-06-01/manifest.json", "wikidrift release --snapshot 2024-06-01"),
        setup=_garbage(Path("releases", B, "manifest.json")),
        then=[(_release(B, "--force"), 0), (_export, 0)],
    ),
    Row(
        "damaged-release-no-force",
        _release(B),
        ("is damaged", "--force"),
        setup=_garbage(Path("releases", B, "retired.parquet")),
        then=[(_release(B, "--force"), 0), (lambda c: ["verify", "--release", B, *c.common], 0)],
    ),
    Row(
        "release-manifest-entry-without-digest",
        _release(B),
        ("is damaged", "--force"),
        setup=_drop_a_digest,
        then=[(_release(B, "--force"), 0), (lambda c: ["verify", "--release", B, *c.common], 0)],
    ),
    # ---- written by a newer wikidrift
    Row("newer-workdir", _label, ("newer wikidrift", "9.0.0"), setup=_newer_workdir),
    Row(
        "newer-workdir-read-only-command",
        lambda c: ["verify", "--release", B, *c.common],
        ("newer wikidrift",),
        setup=_newer_workdir,
    ),
    Row(
        "newer-table",
        _label,
        ("sentences.parquet", "schema version 99", "newer wikidrift"),
        setup=_newer_table,
    ),
]


@pytest.fixture
def scripted_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that phrase or generate get the scripted model the workdir was built with
    (the call cache stays the real one)."""
    import pipeline.runtime as runtime
    from pipeline.models.llm.scripted import ScriptedBackend
    from tests.scripted_llm import good_answer

    real = runtime.llm_from_config

    def scripted(cfg, workdir, *, start=True):  # noqa: ANN001, ANN202
        setup = real(cfg, workdir, start=start)
        setup.backend.backend = ScriptedBackend(good_answer)
        return setup

    monkeypatch.setattr(runtime, "llm_from_config", scripted)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own exit
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _one_error_line(err: str, needles: tuple[str, ...]) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("wikidrift: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_is_one_line_exit_2_and_loses_nothing(
    row: Row, released_workdir: Path, tmp_path: Path, capsys, scripted_llm: None
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    config = scripted_config_file(scratch)
    ctx = Ctx(workdir, scratch, ["--workdir", str(workdir), "--profile", "offline"])
    ctx.common += ["--config", str(config)]
    if row.setup is not None:
        row.setup(ctx)
    code, err = _run(row.args(ctx), capsys)
    assert code == 2, err
    _one_error_line(err, row.needles)
    for then, expected in row.then:
        code, err = _run(then(ctx), capsys)
        assert code == expected, (then(ctx), err)


def test_read_only_output_folder_is_one_line(
    released_workdir: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "hf"
    out.mkdir()
    args = ["export-hf", "--release", B, "--out", str(out / "x"), "--workdir"]
    args += [str(released_workdir), "--profile", "offline"]
    with read_only(out):
        code, err = _run(args, capsys)
    assert code == 2
    _one_error_line(err, ("read-only",))
    code, err = _run(args, capsys)  # writable again: the same command works
    assert code == 0, err


def test_an_unexpected_failure_is_one_line_and_v_shows_the_traceback(
    released_workdir: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.release_verify

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise KeyError("a bug")

    monkeypatch.setattr(pipeline.release_verify, "verify_release", broken)
    args = ["verify", "--release", B, "--workdir", str(released_workdir)]
    code, err = _run(args, capsys)
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines() == [
        "wikidrift: internal error: KeyError: 'a bug' (a bug: run again with -v for the "
        "traceback and report it)"
    ]
    with pytest.raises(KeyError):
        main([*args, "-v"])
