"""Stopping a CUDA (NCCL) `tpscope run` on a GPU machine: every process gone within 10 s of
SIGTERM, SIGINT or the launcher's SIGKILL, the run folder marked incomplete; and a model whose
training state exceeds one GPU refused before any process starts.

    PYTHONPATH=. python benchmarks/stop_check.py --nproc 2

Needs torch with CUDA and NCCL only (no psutil: the process tree is read from /proc). Prints one
line per case and exits 1 if any case fails.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL = [
    "--device",
    "cuda",
    "--steps",
    "3000",
    "--profile-steps",
    "1",
    "--layers",
    "2",
    "--hidden",
    "1024",
    "--ffn",
    "4096",
    "--heads",
    "8",
    "--vocab",
    "4096",
    "--seq-len",
    "512",
    "--batch",
    "4",
]


def descendants(pid: int) -> set[int]:
    """Every process under `pid`, from /proc/*/stat (ppid is the 4th field)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_case(how: str, nproc: int, out: Path) -> bool:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpscope.cli",
            "run",
            "--nproc",
            str(nproc),
            *SMALL,
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stdout:
        if line.startswith("step 6/"):
            break
    tree = descendants(proc.pid)
    start = time.monotonic()
    os.kill(proc.pid, getattr(signal, how))
    while any(alive(p) for p in tree) and time.monotonic() - start < 30:
        time.sleep(0.05)
    took = time.monotonic() - start
    left = sorted(p for p in tree if alive(p))
    rc = proc.wait(timeout=30)
    try:
        manifest = json.loads((out / "tpscope_run.jsonc").read_text())
    except (OSError, ValueError):
        manifest = {}
    ok = not left and took < 10 and manifest.get("complete") is False
    print(
        f"{how}: {len(tree)} processes, all gone in {took:.1f} s, left {left}, exit {rc}, "
        f"manifest complete={manifest.get('complete')} stopped={manifest.get('stopped')!r}: "
        f"{'ok' if ok else 'FAILED'}",
        flush=True,
    )
    return ok


def memory_case(nproc: int) -> bool:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpscope.cli",
            "run",
            "--nproc",
            str(nproc),
            "--device",
            "cuda",
            "--hidden",
            "65536",
            "--heads",
            "8",
            "--ffn",
            "262144",
            "--out",
            tempfile.mkdtemp(prefix="tpscope-stop-check-") + "/run",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    ok = done.returncode == 2 and done.stderr.count("\n") == 1 and "AdamW state" in done.stderr
    print(
        f"model larger than a GPU: exit {done.returncode}, {done.stderr.strip()!r}: {'ok' if ok else 'FAILED'}"
    )
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tpscope-stop-check-"))
    results = [stop_case(how, args.nproc, root / how) for how in ("SIGTERM", "SIGINT", "SIGKILL")]
    results.append(memory_case(args.nproc))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
