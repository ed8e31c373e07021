"""The `wikidrift` command line against real local servers: snapshots from the MediaWiki API
and from a dump over HTTP, clear errors, dry-run cost estimates, and the schedule server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.layout import read_snapshot_summary, read_snapshot_table
from pipeline.processes import live_processes
from tests.conftest import REPO_ROOT, STAGE_DATES, WIKISNAP, copy_workdir
from wikidrift.cli import main


def _articles(tmp_path: Path, *titles: str) -> Path:
    path = tmp_path / "articles.txt"
    path.write_text("# test selection\n" + "\n".join(titles) + "\n")
    return path


def test_snapshot_from_the_mediawiki_api(tmp_path: Path, capsys) -> None:
    from tests.servers.mediawiki_api_server import MediaWikiApiServer

    articles = _articles(tmp_path, "Sam Altman", "Sony Music Entertainment", "No such page")
    with MediaWikiApiServer(WIKISNAP) as server:
        code = main(
            [
                "snapshot",
                "--source",
                "api",
                "--input",
                server.url,
                "--date",
                "2024-06-01",
                "--workdir",
                str(tmp_path / "w"),
                "--articles",
                str(articles),
            ]
        )
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 0
    assert out.startswith("articles=2 sentences=") and "not_delivered=1" in out
    titles = set(read_snapshot_table(tmp_path / "w", "2024-06-01", "articles")["title"].to_pylist())
    assert titles == {"Sam Altman", "Sony Music"}  # the redirect resolved to its target
    assert read_snapshot_summary(tmp_path / "w", "2024-06-01").not_delivered == [
        "title 'No such page' (missing)"
    ]


def test_snapshot_from_a_dump_over_http(tmp_path: Path, capsys) -> None:
    from tests.servers.dump_server import DumpServer, build_multistream_dump, wikisnap_revisions

    built = build_multistream_dump(
        wikisnap_revisions(WIKISNAP, "2024-06-01"), tmp_path / "srv", pages_per_stream=4
    )
    articles = _articles(tmp_path, "Dark energy", "LIGO")
    with DumpServer(built.root) as server:
        url = f"{server.base_url}/enwiki/20240601/"
        code = main(
            [
                "snapshot",
                "--source",
                "dump",
                "--input",
                url,
                "--date",
                "2024-06-01",
                "--workdir",
                str(tmp_path / "w"),
                "--articles",
                str(articles),
            ]
        )
        ranges = [r.range for r in server.requests if r.range]
    assert code == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("articles=2 ")
    assert len(ranges) == 2  # only the two streams holding the articles were fetched


def test_snapshot_errors_are_one_clear_line(tmp_path: Path, capsys) -> None:
    args = [
        "snapshot",
        "--source",
        "revisions-dir",
        "--date",
        "2024-06-01",
        "--workdir",
        str(tmp_path),
    ]
    assert main([*args, "--input", ""]) == 2  # the default config names data/sample
    assert "needs --input FOLDER" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[align]\nunchanged_threshold = 2\n")
    assert main([*args, "--input", str(WIKISNAP), "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "align.unchanged_threshold = 2" in err and "Traceback" not in err


def test_generate_dry_run_estimates_without_calling(
    stage_workdir: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.scripted_llm import openai_responder
    from tests.servers.openai_server import OpenAIServer

    workdir = copy_workdir(stage_workdir, tmp_path / "w")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = tmp_path / "c.toml"
    with OpenAIServer(openai_responder) as server:
        config.write_text(f'[llm]\nbackend = "openai"\nbase_url = "{server.url}"\n')
        code = main(
            [
                "generate",
                "--snapshot",
                STAGE_DATES[0],
                "--dry-run",
                "--workdir",
                str(workdir),
                "--profile",
                "offline",
                "--config",
                str(config),
            ]
        )
        assert server.chat_requests == []
        out = capsys.readouterr().out
        assert code == 0 and "dry run 2024-01-01: requests=" in out and "cost_usd<=" in out
        assert int(out.split("requests=")[1].split()[0]) > 0
        # a later snapshot is compared with the latest release, as `wikidrift run` does; the
        # snapshot taken before it but never released is named, not silently used
        args = ["generate", "--snapshot", STAGE_DATES[1], "--dry-run", "--workdir", str(workdir)]
        assert main([*args, "--profile", "offline", "--config", str(config)]) == 0
        err = capsys.readouterr().err
        assert f"note: snapshot {STAGE_DATES[0]} has no release" in err
        assert f"pass --previous {STAGE_DATES[0]}" in err
        assert server.chat_requests == []


def test_serve_starts_a_scheduled_deployment(tmp_path: Path) -> None:
    env = os.environ | {"PREFECT_HOME": str(tmp_path / "prefect")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wikidrift.cli",
            "serve",
            "--workdir",
            str(tmp_path / "w"),
            "--profile",
            "offline",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen = ""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "is being served" not in seen:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
        if "is being served" in seen:  # a scheduler stops the service: 143 within seconds
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
            assert code == 143 and time.monotonic() - sent < 10, proc.stdout.read()[-2000:]
            assert live_processes("prefect.server.api.server", str(tmp_path), in_environ=True) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(30)
    assert "serving deployment wikidrift-monthly (cron '0 6 21 * *')" in seen
    assert "Your flow 'wikidrift-monthly' is being served" in seen, seen[-2000:]


_LATE_SIGNAL = """
import os, signal, sys, time
from wikidrift import cli
signal.signal(signal.SIGTERM, cli._on_late_signal)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
"""


def test_a_signal_while_the_command_finishes_exits_at_once_with_143() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LATE_SIGNAL], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 143
    assert "SIGTERM while finishing; finished work is kept" in done.stderr


def test_main_called_with_argv_gives_the_signal_handlers_back(tmp_path: Path) -> None:
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    assert main(["release", "diff", "2024-01-01", "2024-06-01", "--workdir", str(tmp_path)]) == 2
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_sigterm_during_labeling_exits_143_at_once_and_the_rerun_writes_the_same_labels(
    stage_workdir: Path, tmp_path: Path
) -> None:
    """The label stage stopped while its models load and run: exit 143 within seconds, and the
    same command then writes the labels an uninterrupted command writes."""
    old, new = STAGE_DATES[0], STAGE_DATES[1]
    # torch on one thread, as in the suite's workers: the other worker shares the two cores
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "OMP_NUM_THREADS": "1",
    }

    def label(workdir: Path) -> list[str]:
        command = ["label", "--old", old, "--new", new, "--workdir", str(workdir)]
        return [sys.executable, "-m", "wikidrift.cli", *command, "--profile", "offline"]

    def labels(workdir: Path) -> bytes:
        return (workdir / "labels" / f"{old}__{new}" / "sentence_labels.parquet").read_bytes()

    whole = copy_workdir(stage_workdir, tmp_path / "whole")
    assert subprocess.run(label(whole), env=env, capture_output=True, timeout=600).returncode == 0

    stopped = copy_workdir(stage_workdir, tmp_path / "stopped")
    proc = subprocess.Popen(label(stopped), env=env, stderr=subprocess.PIPE, text=True)
    _wait_for_torch(proc.pid)  # the command is loading its models: the stage has begun
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert code == 143 and time.monotonic() - sent < 10, err
    assert "terminated; finished work is kept" in err
    assert not (stopped / "labels" / f"{old}__{new}" / "sentence_labels.parquet").exists()

    again = subprocess.run(label(stopped), env=env, capture_output=True, timeout=600)
    assert again.returncode == 0
    assert labels(stopped) == labels(whole)


def _wait_for_torch(pid: int, timeout_s: float = 120) -> None:
    """Wait until process ``pid`` has loaded torch's library (the labeler's models load)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text():
            return
        time.sleep(0.05)
    raise AssertionError("torch never loaded")


@pytest.mark.parametrize(
    ("command", "sig"),
    [("generate", signal.SIGTERM), ("evaluate", signal.SIGTERM), ("evaluate", signal.SIGINT)],
)
def test_a_stop_with_llm_requests_in_flight_exits_at_once(
    command: str, sig: signal.Signals, stage_workdir: Path, released_workdir: Path, tmp_path: Path
) -> None:
    """`wikidrift generate` / `evaluate` stopped while their LLM requests hang on the server:
    exit 143 (SIGTERM) or 130 (Ctrl-C) within 10 s, without waiting for the answers."""
    from tests.servers.openai_server import OpenAIServer

    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "OPENAI_API_KEY": "sk-test",
        "PREFECT_HOME": str(tmp_path / "prefect"),
    }
    with OpenAIServer() as server:
        server.hold_after = 0  # every chat request waits, unanswered, until the server stops
        config = tmp_path / "c.toml"
        config.write_text(f'[llm]\nbackend = "openai"\nbase_url = "{server.url}"\n')
        if command == "generate":
            workdir = copy_workdir(stage_workdir, tmp_path / "w")
            args = [
                "generate",
                "--snapshot",
                STAGE_DATES[0],
                "--config",
                str(config),
                "--profile",
                "offline",
            ]
        else:
            workdir = copy_workdir(released_workdir, tmp_path / "w")
            args = ["evaluate", "--release", STAGE_DATES[0], "--model", server.url]
        # A suite started in the background (`make test &`) ignores SIGINT, and a child exec'd
        # then would ignore it too: start it as a terminal would, Ctrl-C handled.
        ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "wikidrift.cli", *args, "--workdir", str(workdir)],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
        finally:
            signal.signal(signal.SIGINT, ignored)
        deadline = time.monotonic() + 120
        while not server.chat_requests and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        assert server.chat_requests, "no LLM request was sent"
        sent = time.monotonic()
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert code == (143 if sig == signal.SIGTERM else 130) and took < 10, err[-2000:]
        said = "terminated" if sig == signal.SIGTERM else "interrupted"
        assert f"{said}; finished work is kept" in err
