"""Starting ranks: torchrun on one node (or one launcher per node), supervised; the workers'
environment; what a failed run says.

No torch at import: the launcher only builds a command line and an environment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tpscope.errors import UserError
from tpscope.fusion.launch.lifetime import (
    LAUNCHER_PID_ENV,
    OUT_DIR_ENV,
    RDZV_ENDPOINT_ENV,
    RDZV_TIMEOUT_ENV,
)
from tpscope.fusion.launch.out_dir import mark_incomplete
from tpscope.runfolder.regimes import DEFAULT_ENV, SAFETY_ENV, worker_env

_REPO_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding tpscope/


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


def child_env(regime: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Environment of the worker processes: the regime's NCCL variables (if one was asked for),
    the safety variables always, and PYTHONPATH reaching this checkout of tpscope."""
    env = worker_env(regime, environ) if regime else {**DEFAULT_ENV, **environ, **SAFETY_ENV}
    paths = [_REPO_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


RDZV_BACKENDS = ("", "c10d", "static", "etcd", "etcd-v2")  # "": torchrun's default
DEFAULT_RDZV_PORT = 29400  # torchrun's, for an endpoint without one


def endpoint_parts(endpoint: str) -> tuple[str, int] | None:
    """(host, port) of `HOST[:PORT]` or `[IPV6][:PORT]`, as torchrun reads it; None when malformed."""
    if endpoint.startswith("["):
        host, sep, rest = endpoint[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
    else:
        host, sep, port_text = endpoint.rpartition(":")
        if not sep:
            host, port_text = endpoint, ""
        elif ":" in host:  # a bare IPv6 address with no port
            return None
    if not host or any(c.isspace() for c in host):
        return None
    if not port_text:
        return host, DEFAULT_RDZV_PORT
    if not (port_text.isascii() and port_text.isdigit() and 1 <= int(port_text) <= 65535):
        return None
    return host, int(port_text)


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
    rdzv_timeout_s: float = 300.0  # the launcher gives up when no worker started by then

    def __post_init__(self) -> None:
        counts = self.nnodes.split(":")
        if not (1 <= len(counts) <= 2 and all(c.isdigit() and int(c) >= 1 for c in counts)):
            raise UserError(
                f"--nnodes {self.nnodes}: give a node count N or a range MIN:MAX (torchrun's form)"
            )
        if len(counts) == 2 and int(counts[0]) > int(counts[1]):
            raise UserError(f"--nnodes {self.nnodes}: MIN is larger than MAX (give MIN:MAX)")
        if self.node_rank < 0:
            raise UserError(f"--node-rank must be >= 0, not {self.node_rank}")
        if self.node_rank >= self.max_nodes:
            n = self.max_nodes
            raise UserError(
                f"--node-rank {self.node_rank}: the job has {n} node{'s' if n > 1 else ''} "
                f"(ranks 0 to {n - 1}; --nnodes {self.nnodes})"
            )
        if self.multi_node and not self.rdzv_endpoint:
            raise UserError(
                f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT, a node every launcher reaches"
            )
        if self.rdzv_endpoint and endpoint_parts(self.rdzv_endpoint) is None:
            raise UserError(
                f"--rdzv-endpoint {self.rdzv_endpoint}: give HOST:PORT (a port 1 to 65535), "
                "a node every launcher reaches"
            )
        if not (self.rdzv_timeout_s > 0 and self.rdzv_timeout_s != float("inf")):
            raise UserError(
                f"--rdzv-timeout-s must be a finite number > 0, not {self.rdzv_timeout_s}"
            )
        if self.rdzv_backend not in RDZV_BACKENDS:
            raise UserError(
                f"--rdzv-backend {self.rdzv_backend}: expected one of {', '.join(RDZV_BACKENDS[1:])}"
            )

    @property
    def multi_node(self) -> bool:
        return self.nnodes != "1" or bool(self.rdzv_endpoint)

    @property
    def max_nodes(self) -> int:
        return int(self.nnodes.split(":")[-1])

    def supervisor_env(self) -> dict[str, str]:
        """What the supervisor needs to give up on a rendezvous in one line (multi-node only)."""
        if not self.multi_node:
            return {}
        return {RDZV_ENDPOINT_ENV: self.rdzv_endpoint, RDZV_TIMEOUT_ENV: repr(self.rdzv_timeout_s)}

    def torchrun_args(self) -> list[str]:
        if not self.multi_node:
            return ["--standalone"]
        args = [
            f"--nnodes={self.nnodes}",
            f"--node-rank={self.node_rank}",
            f"--rdzv-endpoint={self.rdzv_endpoint}",
        ]
        args += [f"--rdzv-backend={self.rdzv_backend}"] if self.rdzv_backend else []
        return args + ([f"--rdzv-id={self.rdzv_id}"] if self.rdzv_id else [])


SINGLE_NODE = Rendezvous()


def torchrun_command(
    nproc: int, module: str, module_args: list[str], rdzv: Rendezvous = SINGLE_NODE
) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE ARGS`, or with
    the multi-node options of `rdzv` in place of `--standalone`."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *rdzv.torchrun_args(),
        f"--nproc-per-node={nproc}",
        "-m",
        module,
        *module_args,
    ]


def supervised_command(
    nproc: int, module: str, module_args: list[str], report: str, rdzv: Rendezvous = SINGLE_NODE
) -> list[str]:
    """torchrun_command run through tpscope.fusion.launch.supervisor, which writes failed ranks to `report`."""
    return [
        sys.executable,
        "-m",
        "tpscope.fusion.launch.supervisor",
        report,
        *torchrun_command(nproc, module, module_args, rdzv)[3:],
    ]


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


def run_supervised(
    command: list[str], env: dict[str, str], out_dir: str | None = None
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


def launch(
    nproc: int,
    module: str,
    module_args: list[str],
    regime: str,
    prog: str = "tpscope run",
    extra_env: Mapping[str, str] | None = None,
    out_dir: str | None = None,
    command: list[str] | None = None,
    rdzv: Rendezvous = SINGLE_NODE,
) -> int:
    """Run the workers under torchrun on this node and return its exit code: 0, 2 when every
    failed rank exited 2 (a user error each printed), 128 + N when stopped by signal N (torchrun
    and every worker stopped first), else 1 after one line naming the rank that failed.
    `extra_env`: variables for these workers only, over this process's environment. `out_dir`:
    the run folder, marked incomplete in its manifest when the run does not finish. `rdzv`: how
    this node joins the others."""
    env = {**child_env(regime, {**os.environ, **(extra_env or {})}), **rdzv.supervisor_env()}
    if rdzv.multi_node:
        print(
            f"{prog}: joining the other nodes at {rdzv.rdzv_endpoint} (--nnodes {rdzv.nnodes}; "
            f"giving up after {rdzv.rdzv_timeout_s:g} s, --rdzv-timeout-s)",
            file=sys.stderr,
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="tpscope-launch-") as tmp:
        report = os.path.join(tmp, "failures.json")
        rc, stop = run_supervised(
            supervised_command(nproc, module, module_args, report, rdzv), env, out_dir
        )
        if rc == 0 and stop is None:
            return 0
        try:
            with open(report, encoding="utf-8") as fh:
                failures = json.load(fh)
        except (OSError, ValueError):
            failures = []
    if stop is None and isinstance(failures, dict) and failures.get("error"):
        # no worker started (the rendezvous failed): the user's setup, one line, no run to mark
        print(f"{prog}: error: {failures['error']}", file=sys.stderr, flush=True)
        return 2
    if stop is not None:
        line = f"stopped by {stop.name}; torchrun and every worker were stopped"
        code = 128 + stop
    else:
        own = [f for f in failures if f["exitcode"] != -signal.SIGTERM]  # not stopped by torchrun
        user_error = bool(own) and all(f["exitcode"] == 2 for f in own)
        line = (
            describe_failure(failures)
            if failures
            else f"the workers' launcher exited with status {rc}"
        )
        code = 2 if user_error else 1
    if out_dir is not None:
        mark_incomplete(out_dir, line, command)
    if code == 2:
        return 2
    print(
        f"{prog}: error: {line}" + (f" ({out_dir} is marked incomplete)" if out_dir else ""),
        file=sys.stderr,
        flush=True,
    )
    return code
