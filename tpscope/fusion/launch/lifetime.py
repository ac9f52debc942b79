"""Processes that end with the one that started them (Linux): torchrun's agent when `tpscope run`
dies, the workers when the agent dies, whatever killed it (SIGKILL included)."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
LAUNCHER_PID_ENV = "TPSCOPE_LAUNCHER_PID"  # the supervisor's parent, to notice it died before prctl
OUT_DIR_ENV = "TPSCOPE_RUN_OUT_DIR"  # the run folder the supervisor marks incomplete when stopped
# the rendezvous endpoint and the seconds the supervisor waits for it before giving up in one line
RDZV_ENDPOINT_ENV = "TPSCOPE_RDZV_ENDPOINT"
RDZV_TIMEOUT_ENV = "TPSCOPE_RDZV_TIMEOUT_S"


def die_with_parent(sig: signal.Signals) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies; False where it cannot
    (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_is_gone(expected_parent: str | None) -> bool:
    """True when the parent this process was started by (its pid in `expected_parent`) already
    died: before `die_with_parent` was in force, so no signal will come."""
    return (
        bool(expected_parent) and expected_parent.isdigit() and os.getppid() != int(expected_parent)
    )
