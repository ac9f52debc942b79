"""A rank that dies or hangs does not hang `tpscope run` (gloo on CPU, real processes): the command
exits non-zero soon, its last word is one line naming the rank, and no worker is left running.
Also: bad shapes and modes are refused before any process starts (no folder is written)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.fusion._cli import REPO, TINY_MODEL, tpscope
from tpscope.fusion.launch.torchrun import describe_failure

TINY = ["--device", "cpu", "--nproc", "2", "--profile-steps", "0", *TINY_MODEL]
START_LIMIT_S = 120  # torch import and rendezvous of two workers on a loaded 2-core machine
FINAL_LINE = re.compile(
    r"^tpscope run: error: rank (\d+) \(pid (\d+)\) "
    r"(died with signal \d+ \(\w+\)|exited with status \d+); the other ranks were stopped "
    r"\(.+ is marked incomplete\)$"
)


class _Run:
    """`tpscope run` as a child process whose stdout and stderr lines are collected with times."""

    def __init__(self, out: Path, timeout_s: float) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cmd = [
            sys.executable,
            "-m",
            "tpscope.cli",
            "run",
            "--out",
            str(out),
            "--steps",
            "3000",
            "--timeout-s",
            str(timeout_s),
            *TINY,
        ]
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.out: list[tuple[float, str]] = []
        self.err: list[tuple[float, str]] = []
        self.readers = [
            threading.Thread(target=self._read, args=(s, d), daemon=True)
            for s, d in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for t in self.readers:
            t.start()
        self.seen: dict[int, psutil.Process] = {}

    @staticmethod
    def _read(stream, into: list) -> None:
        for line in stream:
            into.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, lines: list, pattern: str, limit_s: float) -> float:
        """Time at which a line matching `pattern` arrived; fails after `limit_s`."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            for t, line in list(lines):
                if re.search(pattern, line):
                    return t
            assert self.proc.poll() is None, (
                f"exited early ({self.proc.returncode}): {self.stderr()[-3000:]}"
            )
            time.sleep(0.05)
        raise AssertionError(
            f"no line matching {pattern!r} within {limit_s} s: {self.stderr()[-3000:]}"
        )

    def workers(self) -> dict[int, psutil.Process]:
        """RANK -> worker process (torchrun's children running tpscope.fusion.run.worker)."""
        found = {}
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if "tpscope.fusion.run.worker" in child.cmdline():
                    found[int(child.environ()["RANK"])] = child
            except (psutil.NoSuchProcess, KeyError):
                continue
        self.seen.update(found)
        return found

    def stderr(self) -> str:
        return "\n".join(line for _, line in self.err)

    def cleanup(self) -> None:
        """Kill whatever is left of the tree (the test failed half-way)."""
        try:
            tree = [
                psutil.Process(self.proc.pid),
                *psutil.Process(self.proc.pid).children(recursive=True),
            ]
        except psutil.NoSuchProcess:
            tree = []
        for p in [*tree, *self.seen.values()]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for t in self.readers:
            t.join(timeout=5)


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _training(run: _Run) -> dict[int, psutil.Process]:
    run.wait_for(run.out, r"^step 3/", START_LIMIT_S)
    workers = run.workers()
    assert sorted(workers) == [0, 1], workers
    return workers


def _check_end(run: _Run, rc_limit_s: float) -> tuple[str, float]:
    t0 = time.monotonic()
    rc = run.proc.wait(timeout=rc_limit_s)
    took = time.monotonic() - t0
    for t in run.readers:
        t.join(timeout=10)
    err = run.stderr()
    assert rc == 1, (rc, err[-3000:])
    assert "Traceback" not in err, err[-5000:]
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert FINAL_LINE.match(last), err[-3000:]
    time.sleep(0.5)
    left = [p.pid for p in run.seen.values() if not _gone(p)]
    assert left == [], f"workers still running: {left}"
    return last, took


def test_a_killed_rank_ends_the_run_at_once_with_one_line(tmp_path):
    run = _Run(tmp_path / "run", timeout_s=15)
    try:
        victim = _training(run)[1]
        killed_at = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        last, _ = _check_end(run, rc_limit_s=60)
        took = time.monotonic() - killed_at
        assert last == (
            f"tpscope run: error: rank 1 (pid {victim.pid}) died with signal 9 (SIGKILL); "
            f"the other ranks were stopped ({tmp_path / 'run'} is marked incomplete)"
        ), last
        assert json.loads((tmp_path / "run" / "tpscope_run.jsonc").read_text())["complete"] is False
        assert took < 15 + 30, f"{took:.1f} s from the kill to the exit"  # measured ~1 s on 2 cores
        print(f"killed rank -> exit in {took:.2f} s")
    finally:
        run.cleanup()


def test_a_hung_rank_fails_the_others_within_the_timeout(tmp_path):
    timeout_s = 5.0
    run = _Run(tmp_path / "run", timeout_s=timeout_s)
    try:
        victim = _training(run)[1]
        stopped_at = time.monotonic()
        victim.send_signal(signal.SIGSTOP)  # alive, holds its sockets, answers no collective
        seen = run.wait_for(
            run.err,
            r"^tpscope run: error: rank 0: a collective failed \(.*\): "
            r"a peer rank died, or hung past --timeout-s$",
            timeout_s + 30,
        )
        waited = seen - stopped_at
        assert timeout_s - 1 <= waited < timeout_s + 15, f"rank 0 gave up after {waited:.1f} s"
        # torchrun has sent the hung rank SIGTERM; it takes effect once the process runs again
        # (a stopped process would be SIGKILLed after torchrun's 30 s grace)
        victim.send_signal(signal.SIGCONT)
        _, took = _check_end(run, rc_limit_s=45)
        print(
            f"hung rank -> rank 0 reported after {waited:.2f} s (timeout {timeout_s} s); exit {took:.2f} s later"
        )
    finally:
        run.cleanup()


def test_describe_failure_names_the_rank_that_failed_not_the_ones_torchrun_stopped():
    term, kill = -int(signal.SIGTERM), -int(signal.SIGKILL)
    assert describe_failure(
        [
            {"rank": 0, "pid": 10, "exitcode": term},
            {"rank": 3, "pid": 13, "exitcode": kill},
            {"rank": 1, "pid": 11, "exitcode": 1},
        ]
    ) == ("rank 3 (pid 13) died with signal 9 (SIGKILL); the other ranks were stopped")
    assert describe_failure(
        [
            {"rank": 2, "pid": 12, "exitcode": 1},
            {"rank": 0, "pid": 10, "exitcode": term},
            {"rank": 1, "pid": 11, "exitcode": 1},
        ]
    ) == ("rank 1 (pid 11) exited with status 1; the other ranks were stopped")
    assert describe_failure([{"rank": 5, "pid": 15, "exitcode": term}]).startswith(
        "rank 5 (pid 15) died with signal 15 (SIGTERM)"
    )


@pytest.mark.parametrize(
    "bad",
    [
        ["--nproc", "3"],  # heads 2 do not divide over 3 ranks
        ["--chunks", "3"],  # 16 tokens per rank in 3 chunks
        ["--mode", "symm_mem"],  # no CPU path
        ["--mode", "copy_engine"],  # no CPU path either
        ["--nproc", "4", "--heads", "4", "--ffn", "66"],  # ffn 66 over 4 ranks
        ["--batch", "3", "--seq-len", "5"],  # 15 tokens over 2 ranks
    ],
)
def test_bad_shapes_and_modes_are_refused_before_any_process_starts(tmp_path, bad):
    out = tmp_path / "never"
    t0 = time.monotonic()
    done = tpscope("run", "--out", str(out), "--steps", "3", *TINY, *bad, timeout=60)
    assert done.returncode == 2, (bad, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tpscope run: error: "), done.stderr
    assert not out.exists(), "refused before the run folder (and any worker) was made"
    assert "tp=" not in done.stdout and time.monotonic() - t0 < 30
