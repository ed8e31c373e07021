"""Child processes that never outlive wikidrift."""

from __future__ import annotations

import contextlib
import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL the calling process when the thread that started it exits (the
    whole parent, when that is its main thread); a no-op elsewhere. Call it in the child: as
    its first step, or as ``preexec_fn`` (the setting survives ``exec``)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
