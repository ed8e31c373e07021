"""Progress reports: nothing is drawn without a reporter; the console reporter draws a bar per
stage on a terminal and one line per finished stage elsewhere."""

from __future__ import annotations

import io

from pipeline import progress
from pipeline.progress import ConsoleProgress


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def stage(self, label: str, total: int | None, unit: str) -> None:
        self.events.append(("stage", label, total, unit))

    def add_total(self, n: int) -> None:
        self.events.append(("add_total", n))

    def advance(self, n: int = 1) -> None:
        self.events.append(("advance", n))


def test_reports_reach_the_installed_reporter_only() -> None:
    progress.stage("nobody listens", 3)  # no reporter: a no-op
    recorder = Recorder()
    progress.set_reporter(recorder)
    try:
        progress.stage("2024-01-01 generate", 0, "LLM request")
        progress.add_total(4)
        progress.add_total(0)  # nothing planned: not reported
        progress.advance()
    finally:
        progress.set_reporter(None)
    progress.advance()
    assert recorder.events == [
        ("stage", "2024-01-01 generate", 0, "LLM request"),
        ("add_total", 4),
        ("advance", 1),
    ]


def test_without_a_terminal_each_finished_stage_is_one_line() -> None:
    out = io.StringIO()
    console = ConsoleProgress(out)
    assert not console.bars
    console.stage("2024-01-01 snapshot", 6, "article")
    console.advance(4)
    console.advance(2)
    console.stage("2024-01-01 label (up to date)", 0, "article")
    console.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("2024-01-01 snapshot: 6 articles in ")
    assert lines[1].startswith("2024-01-01 label (up to date) in ")


def test_on_a_terminal_a_bar_grows_with_planned_requests() -> None:
    out = io.StringIO()
    console = ConsoleProgress(out, bars=True)
    console.stage("2024-06-01 generate", 0, "LLM request")
    console.add_total(10)
    console.advance(5)
    bar = console._bar
    assert (bar.n, bar.total) == (5, 10)
    console.close()
    assert "2024-06-01 generate" in out.getvalue() and "5/10 LLM requests" in out.getvalue()


def test_a_note_comes_after_the_stage_it_interrupts(capsys) -> None:
    out = io.StringIO()
    reporter = ConsoleProgress(out, bars=False)
    progress.set_reporter(reporter)
    try:
        progress.stage("2024-01-01 snapshot", 2)
        progress.advance(2)
        progress.note("starting the local LLM (m) ...")
        progress.stage("2024-01-01 generate", None, "request")
        reporter.close()
    finally:
        progress.set_reporter(None)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("2024-01-01 snapshot: 2 articles in ")
    assert lines[1] == "starting the local LLM (m) ..."
    assert lines[2].startswith("2024-01-01 generate in ")
    progress.note("no reporter: stderr")
    assert capsys.readouterr().err == "no reporter: stderr\n"
