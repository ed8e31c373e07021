"""End to end in a real headless Chromium: the `wikidrift annotate serve` process, the page,
the keyboard, and the judgments on disk.

Needs Debian's ``chromium`` (``apt-get install -y chromium``; Playwright's own browser download
is not used). Skips, saying why, only when no browser can be found or launched.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from pipeline.annotate import read_tasks
from pipeline.annotate.sample import sample_tasks
from tests.annotate import RELEASE, read_jsonl
from tests.conftest import REPO_ROOT

CHROMIUM = Path(os.environ.get("WIKIDRIFT_CHROMIUM", "/usr/bin/chromium"))
# ENVIRONMENT.md: no sandbox in containers, and nothing may leave 127.0.0.1.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
KEYS = [("1", "supported"), ("2", "not_supported"), ("3", "uncertain")]

# Checked before any fixture is built: without a browser there is nothing to wait for.
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (or set "
    "WIKIDRIFT_CHROMIUM) to run the end-to-end annotation page test",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium, or a skip that says why there is none."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (or set "
            "WIKIDRIFT_CHROMIUM) to run the end-to-end annotation page test"
        )
    with sync_playwright() as p:
        try:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        except PlaywrightError as exc:
            pytest.skip(f"Chromium at {CHROMIUM} could not be launched: {exc}")
        try:
            yield chromium
        finally:
            chromium.close()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return ""


@pytest.fixture
def served(released_workdir: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`wikidrift annotate serve` on a free port over a fresh sample: (url, annotations root)."""
    root = tmp_path / "ann"
    sample_tasks(released_workdir, RELEASE, per_label=4, seed=21, annotations_root=root)
    stderr = (tmp_path / "serve.stderr").open("w")
    cmd = [sys.executable, "-m", "wikidrift.cli", "annotate", "serve", "--release", RELEASE]
    cmd += ["--workdir", str(released_workdir), "--annotations-dir", str(root), "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = _first_line(proc, timeout=60)
        url = next((w for w in line.split() if w.startswith("http://127.0.0.1:")), None)
        if url is None:
            proc.kill()
            pytest.fail(
                f"the server did not start: {line!r} {(tmp_path / 'serve.stderr').read_text()}"
            )
        yield url, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr.close()


def _watch(page: Page, base: str) -> dict[str, list[Any]]:
    """Collect page errors and any request that leaves the annotation server."""
    seen: dict[str, list[Any]] = {"errors": [], "foreign": []}
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.on("console", lambda msg: seen["errors"].append(msg.text) if msg.type == "error" else None)
    page.on(
        "request",
        lambda req: seen["foreign"].append(req.url) if not req.url.startswith(base) else None,
    )
    return seen


def test_annotate_three_tasks_with_the_keyboard(browser: Browser, served: tuple[str, Path]) -> None:
    url, root = served
    tasks = read_tasks(root / RELEASE)
    n = len(tasks)
    page = browser.new_page()
    seen = _watch(page, url)
    try:
        page.goto(url)
        expect(page.locator("#annotator-input")).to_be_focused()
        page.keyboard.type("tester")
        page.keyboard.press("Enter")
        progress, sentence = page.locator("#progress"), page.locator("#sentence")
        expect(progress).to_have_text(f"0 / {n}")
        for i, (key, _) in enumerate(KEYS):
            expect(sentence).to_have_text(tasks[i]["sentence"])
            page.keyboard.press(key)
            expect(progress).to_have_text(f"{i + 1} / {n}")
        expect(sentence).to_have_text(tasks[3]["sentence"])

        lines = read_jsonl(root / RELEASE / "tester.jsonl")
        assert [(ln["task_id"], ln["label"]) for ln in lines] == [
            (tasks[i]["task_id"], label) for i, (_, label) in enumerate(KEYS)
        ]
        assert all(ln["annotator"] == "tester" for ln in lines)

        # A reload remembers the name and resumes at the first unjudged task.
        page.reload()
        expect(progress).to_have_text(f"3 / {n}")
        expect(sentence).to_have_text(tasks[3]["sentence"])
        expect(page.locator("#annotator-label")).to_have_text("tester")
        assert len(read_jsonl(root / RELEASE / "tester.jsonl")) == 3
    finally:
        page.close()
    assert not seen["errors"], seen["errors"]
    assert not seen["foreign"], seen["foreign"]


def test_back_changes_an_answer_and_old_article_opens(
    browser: Browser, served: tuple[str, Path]
) -> None:
    url, root = served
    tasks = read_tasks(root / RELEASE)
    n = len(tasks)
    page = browser.new_page()
    seen = _watch(page, url)
    try:
        page.goto(url)
        page.keyboard.type("Second Reader")  # normalized to the slug second-reader
        page.keyboard.press("Enter")
        progress, sentence = page.locator("#progress"), page.locator("#sentence")
        expect(sentence).to_have_text(tasks[0]["sentence"])
        page.keyboard.press("2")
        expect(progress).to_have_text(f"1 / {n}")
        expect(sentence).to_have_text(tasks[1]["sentence"])
        page.keyboard.press("u")
        expect(sentence).to_have_text(tasks[0]["sentence"])
        expect(page.locator('button.judge[data-label="not_supported"]')).to_have_class(
            "judge chosen"
        )
        page.keyboard.press("o")
        old = page.locator("#old-article")
        expect(old).to_be_visible()
        expect(old.locator("p.old-sentence").first).to_be_visible()
        page.keyboard.press("1")
        expect(sentence).to_have_text(tasks[1]["sentence"])
        expect(progress).to_have_text(f"1 / {n}")
        lines = read_jsonl(root / RELEASE / "second-reader.jsonl")
        assert [(ln["task_id"], ln["label"]) for ln in lines] == [
            (tasks[0]["task_id"], "not_supported"),
            (tasks[0]["task_id"], "supported"),
        ]
    finally:
        page.close()
    assert not seen["errors"], seen["errors"]
    assert not seen["foreign"], seen["foreign"]


def test_a_busy_answer_is_retried_and_the_judgment_saved_once(
    browser: Browser, served: tuple[str, Path]
) -> None:
    """The server's 503 + Retry-After (every slot busy) makes the page send the post again."""
    url, root = served
    tasks = read_tasks(root / RELEASE)
    page = browser.new_page()
    seen = _watch(page, url)
    refused: list[str] = []

    def busy_once(route: Route) -> None:
        if route.request.method == "POST" and not refused:
            refused.append(route.request.post_data or "")
            route.fulfill(status=503, headers={"Retry-After": "1"}, body="busy\n")
        else:
            route.fallback()

    try:
        page.route("**/api/judgments", busy_once)
        page.goto(url)
        page.keyboard.type("patient")
        page.keyboard.press("Enter")
        expect(page.locator("#sentence")).to_have_text(tasks[0]["sentence"])
        page.keyboard.press("1")
        expect(page.locator("#status")).to_contain_text("Server busy")
        expect(page.locator("#progress")).to_have_text(f"1 / {len(tasks)}")
        expect(page.locator("#status")).to_contain_text("Saved: Supported")
        lines = read_jsonl(root / RELEASE / "patient.jsonl")
        assert [(ln["task_id"], ln["label"]) for ln in lines] == [
            (tasks[0]["task_id"], "supported")
        ]
        assert len(refused) == 1 and tasks[0]["task_id"] in refused[0]
    finally:
        page.close()
    # Chromium logs the refused request itself as a console error; nothing else may fail.
    assert [e for e in seen["errors"] if "503" not in e] == []
    assert not seen["foreign"], seen["foreign"]
