"""Child processes that die with their parent, and finding live ones by command line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pipeline.processes import die_with_parent, live_processes

CHILD = "# test-child"
_PARENT = """
import subprocess, sys, time
from pipeline.processes import die_with_parent
code = "import time; time.sleep(60)  # test-" + "child"  # only the child's argv holds it whole
child = subprocess.Popen([sys.executable, "-c", code, sys.argv[1]], preexec_fn=die_with_parent)
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_child_dies_with_its_killed_parent_and_is_found_until_then(tmp_path: Path) -> None:
    marker = str(tmp_path / "child-marker")
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, marker], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert live_processes(CHILD, marker) == [child]
    assert live_processes(CHILD, "no-such-marker") == []
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while live_processes(CHILD, marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_processes(CHILD, marker) == []


def test_die_with_parent_is_harmless_in_this_process() -> None:
    die_with_parent()  # the test runner's parent outlives it; only the setting is made
