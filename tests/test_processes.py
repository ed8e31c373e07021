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


_TREE = """
import subprocess, sys, time
from pipeline.processes import descendants, kill_descendants
sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
# a child that starts a grandchild (as a Dask nanny starts its worker), and a plain child
middle = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(60)", *sleeper])
plain = subprocess.Popen(sleeper)
deadline = time.monotonic() + 20
while len(descendants()) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
tree = descendants()
print(" ".join(map(str, tree)), flush=True)
assert tree.index(middle.pid) < len(tree) - 1  # parents before their children
kill_descendants()
time.sleep(30)
"""


def test_kill_descendants_kills_children_and_grandchildren() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    tree = [int(pid) for pid in proc.stdout.readline().split()]
    assert len(tree) == 3
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not any(_alive(pid) for pid in tree)
    finally:
        proc.kill()
        proc.wait()


def _alive(pid: int) -> bool:
    """Running and not a zombie (a killed child stays a zombie until its parent reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
