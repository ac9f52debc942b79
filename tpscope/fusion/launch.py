"""Starting ranks: torchrun on one node, or joining the torchrun a user started (many nodes).

No torch at import: the launcher only builds a command line and an environment.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tpscope.errors import UserError
from tpscope.fusion.lifetime import LAUNCHER_PID_ENV, OUT_DIR_ENV
from tpscope.outputs import check_out_folder, make_folder
from tpscope.runfolder.layout import LOCK_NAME, MANIFEST_NAME, RUN_ARTIFACTS
from tpscope.runfolder.manifest import ManifestError, incomplete, manifest_from_dict, write_manifest
from tpscope.runfolder.regimes import DEFAULT_ENV, SAFETY_ENV, infer_regime, worker_env

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def exit_now(rc: int) -> None:
    """End a torchrun rank without the interpreter's teardown, once its work is written and its
    process group destroyed: on torch 2.13 (CPU, gloo) 1 run in 5-20 aborted in that teardown
    (`terminate called without an active exception`, a rank dying with SIGABRT after the run
    was complete)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def inside_torchrun(environ: Mapping[str, str]) -> bool:
    """True when this process is a rank of a torchrun (RANK and WORLD_SIZE set)."""
    return "RANK" in environ and "WORLD_SIZE" in environ


def prepare_out_dir(out_dir: str, overwrite: bool, *, clear: bool = True) -> Path:
    """Refuse an existing non-empty folder unless `overwrite`; with it, remove the traces and
    manifest of the earlier run (only those: other files stay) so that runs never mix."""
    path = Path(out_dir)
    check_out_folder(path)
    if path.is_dir() and any(p.name != LOCK_NAME for p in path.iterdir()):
        if not overwrite:
            raise UserError(f"{path}: folder exists and is not empty (pass --overwrite to replace the run in it)")
        if clear:
            for pattern in RUN_ARTIFACTS:
                for old in path.glob(pattern):
                    old.unlink()
            for sub in path.glob("plugins"):
                shutil.rmtree(sub, ignore_errors=True)
    make_folder(path)
    return path


@dataclass
class OutDirClaim:
    """A run folder this process holds (an flock on its lock file) until `release`."""

    path: Path
    fd: int

    def release(self) -> None:
        lock = self.path / LOCK_NAME
        try:
            if os.stat(lock).st_ino == os.fstat(self.fd).st_ino:
                lock.unlink()  # still held: no other run can take it between the unlink and the close
        except OSError:
            pass
        os.close(self.fd)


def claim_out_dir(out_dir: str, overwrite: bool) -> OutDirClaim:
    """Hold `out_dir` for this run: refuse, in one line, a folder another running `tpscope run`
    holds (two runs started together get one each, never both), then `prepare_out_dir`. The
    hold ends with `release`, or with this process however it ends (the kernel drops the flock)."""
    path = Path(out_dir)
    check_out_folder(path)
    make_folder(path)
    lock = path / LOCK_NAME
    for _ in range(10):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise UserError(f"--out {path}: another tpscope run (pid {holder}) is writing into this folder") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a lock file its holder removed while we opened it
            break
        os.close(fd)
    else:
        raise UserError(f"--out {path}: could not take the folder's lock file {LOCK_NAME}")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    claim = OutDirClaim(path, fd)
    try:
        prepare_out_dir(out_dir, overwrite)
    except BaseException:
        claim.release()
        raise
    return claim


def unique_out_dir(parent: str, stem: str) -> str:
    """`parent/stem`, or `stem-2`, `stem-3`, ...: the first name that this call creates (mkdir is
    atomic), so two runs started in the same second never share a folder."""
    make_folder(Path(parent), option="--out (default)")
    for n in range(1, 10_000):
        name = os.path.join(parent, stem if n == 1 else f"{stem}-{n}")
        try:
            os.mkdir(name)
            return name
        except FileExistsError:
            continue
    raise UserError(f"{parent}: no free run folder name for {stem}; pass --out")


def mark_incomplete(out_dir: str | Path, reason: str, command: list[str] | None = None) -> None:
    """Record in the run folder's manifest that the run did not finish: `complete: false` and why.
    A manifest of a finished run is left as it is; else a minimal one is written (atomically)."""
    path = Path(out_dir) / MANIFEST_NAME
    try:
        manifest = manifest_from_dict(json.loads(path.read_text()), str(path))
    except (OSError, ValueError, ManifestError):
        manifest = None
    if manifest is not None and manifest.complete is True:
        return
    from tpscope import __version__

    try:
        write_manifest(out_dir, incomplete(manifest, reason, __version__, command))
    except OSError:
        pass  # the folder went away: nothing left to mark


CPU_REGIME = "gloo"  # what a CPU run records as its regime: gloo over TCP, no NCCL environment


def resolve_regime(regime: str, environ: Mapping[str, str], device: str = "cuda") -> str:
    """The regime name to record: the one asked for, else the one the environment amounts to
    (a CPU run's, gloo's, whatever NCCL variables are set)."""
    if device == "cpu":
        return regime or CPU_REGIME
    return regime or infer_regime(environ)


def child_env(regime: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Environment of the worker processes: the regime's NCCL variables (if one was asked for),
    the safety variables always, and PYTHONPATH reaching this checkout of tpscope."""
    env = worker_env(regime, environ) if regime else {**DEFAULT_ENV, **environ, **SAFETY_ENV}
    paths = [_REPO_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@dataclass(frozen=True, slots=True)
class Rendezvous:
    """torchrun's multi-node options, passed through as the user gave them (docs/runtime.md).

    One launcher per node: every launcher names the same `rdzv_endpoint` (HOST:PORT of a node
    they all reach) and `rdzv_id`; `nnodes` is N or MIN:MAX; `node_rank` orders the nodes for the
    static backend. With none of them given, one node runs alone (torchrun's `--standalone`)."""

    nnodes: str = "1"
    node_rank: int = 0
    rdzv_endpoint: str = ""
    rdzv_backend: str = ""
    rdzv_id: str = ""

    def __post_init__(self) -> None:
        counts = self.nnodes.split(":")
        if not (1 <= len(counts) <= 2 and all(c.isdigit() and int(c) >= 1 for c in counts)):
            raise UserError(f"--nnodes {self.nnodes}: give a node count N or a range MIN:MAX (torchrun's form)")
        if self.node_rank < 0:
            raise UserError(f"--node-rank must be >= 0, not {self.node_rank}")
        if self.multi_node and not self.rdzv_endpoint:
            raise UserError(f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT, a node every launcher reaches")

    @property
    def multi_node(self) -> bool:
        return self.nnodes != "1" or bool(self.rdzv_endpoint)

    @property
    def max_nodes(self) -> int:
        return int(self.nnodes.split(":")[-1])

    def torchrun_args(self) -> list[str]:
        if not self.multi_node:
            return ["--standalone"]
        args = [f"--nnodes={self.nnodes}", f"--node-rank={self.node_rank}", f"--rdzv-endpoint={self.rdzv_endpoint}"]
        args += [f"--rdzv-backend={self.rdzv_backend}"] if self.rdzv_backend else []
        return args + ([f"--rdzv-id={self.rdzv_id}"] if self.rdzv_id else [])


SINGLE_NODE = Rendezvous()


def torchrun_command(nproc: int, module: str, module_args: list[str], rdzv: Rendezvous = SINGLE_NODE) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE ARGS`, or with
    the multi-node options of `rdzv` in place of `--standalone`."""
    return [sys.executable, "-m", "torch.distributed.run", *rdzv.torchrun_args(),
            f"--nproc-per-node={nproc}", "-m", module, *module_args]


def supervised_command(nproc: int, module: str, module_args: list[str], report: str,
                       rdzv: Rendezvous = SINGLE_NODE) -> list[str]:
    """torchrun_command run through tpscope.fusion.supervisor, which writes failed ranks to `report`."""
    return [sys.executable, "-m", "tpscope.fusion.supervisor", report,
            *torchrun_command(nproc, module, module_args, rdzv)[3:]]


def describe_failure(failures: list[dict]) -> str:
    """One line on the rank that failed: one killed by a signal other than torchrun's own SIGTERM
    (sent to the survivors) first, else one that exited non-zero; the lowest rank among equals."""
    def culprit_order(f: dict) -> tuple[int, int]:
        code = f["exitcode"]
        return (0 if code < 0 and code != -signal.SIGTERM else 1 if code > 0 else 2, f["rank"])

    f = min(failures, key=culprit_order)
    code = f["exitcode"]
    if code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        what = f"died with signal {-code}{name}"
    else:
        what = f"exited with status {code}"
    return f"rank {f['rank']} (pid {f['pid']}) {what}; the other ranks were stopped"


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_GRACE_S = 7.0  # torchrun's own grace is 30 s; a stop must be done within 10 s


def run_supervised(command: list[str], env: dict[str, str], out_dir: str | None = None
                   ) -> tuple[int, signal.Signals | None]:
    """Run the supervisor (torchrun) and wait for it; (exit status, the stop signal received).
    SIGTERM, SIGINT or SIGHUP to this process is passed on as one SIGTERM (torchrun stops its
    workers); one still alive after STOP_GRACE_S is SIGKILLed with its process group (the workers
    die with it: `lifetime.die_with_parent`)."""
    received: list[signal.Signals] = []
    env = {**env, LAUNCHER_PID_ENV: str(os.getpid()), **({OUT_DIR_ENV: out_dir} if out_dir else {})}
    proc = subprocess.Popen(command, env=env, start_new_session=True)

    def on_signal(signum: int, _frame) -> None:
        if not received:
            received.append(signal.Signals(signum))
            _signal_group(proc.pid, signal.SIGTERM)

    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        deadline = None
        while True:
            try:
                rc = proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if received and deadline is None:
                deadline = time.monotonic() + STOP_GRACE_S
            if deadline is not None and time.monotonic() > deadline:
                _signal_group(proc.pid, signal.SIGKILL)
                rc = proc.wait()
                break
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    return rc, (received[0] if received else None)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def launch(nproc: int, module: str, module_args: list[str], regime: str, prog: str = "tpscope run",
           extra_env: Mapping[str, str] | None = None, out_dir: str | None = None,
           command: list[str] | None = None, rdzv: Rendezvous = SINGLE_NODE) -> int:
    """Run the workers under torchrun on this node and return its exit code: 0, 2 when every
    failed rank exited 2 (a user error each printed), 128 + N when stopped by signal N (torchrun
    and every worker stopped first), else 1 after one line naming the rank that failed.
    `extra_env`: variables for these workers only, over this process's environment. `out_dir`:
    the run folder, marked incomplete in its manifest when the run does not finish. `rdzv`: how
    this node joins the others."""
    env = child_env(regime, {**os.environ, **(extra_env or {})})
    with tempfile.TemporaryDirectory(prefix="tpscope-launch-") as tmp:
        report = os.path.join(tmp, "failures.json")
        rc, stop = run_supervised(supervised_command(nproc, module, module_args, report, rdzv), env, out_dir)
        if rc == 0 and stop is None:
            return 0
        try:
            with open(report, encoding="utf-8") as fh:
                failures = json.load(fh)
        except (OSError, ValueError):
            failures = []
    if stop is not None:
        line = f"stopped by {stop.name}; torchrun and every worker were stopped"
        code = 128 + stop
    else:
        own = [f for f in failures if f["exitcode"] != -signal.SIGTERM]  # not stopped by torchrun
        user_error = bool(own) and all(f["exitcode"] == 2 for f in own)
        line = (describe_failure(failures) if failures else f"the workers' launcher exited with status {rc}")
        code = 2 if user_error else 1
    if out_dir is not None:
        mark_incomplete(out_dir, line, command)
    if code == 2:
        return 2
    print(f"{prog}: error: {line}" + (f" ({out_dir} is marked incomplete)" if out_dir else ""),
          file=sys.stderr, flush=True)
    return code
