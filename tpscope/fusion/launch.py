"""Starting ranks: torchrun on one node, or joining the torchrun a user started (many nodes).

No torch at import: the launcher only builds a command line and an environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tpscope.errors import UserError
from tpscope.fusion.regimes import DEFAULT_ENV, SAFETY_ENV, infer_regime, worker_env

RUN_ARTIFACTS = ("*.pt.trace.json", "*.pt.trace.json.gz", "tpscope_run.json")
_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def inside_torchrun(environ: Mapping[str, str]) -> bool:
    """True when this process is a rank of a torchrun (RANK and WORLD_SIZE set)."""
    return "RANK" in environ and "WORLD_SIZE" in environ


def prepare_out_dir(out_dir: str, overwrite: bool, *, clear: bool = True) -> Path:
    """Refuse an existing non-empty folder unless `overwrite`; with it, remove the traces and
    manifest of the earlier run (only those: other files stay) so that runs never mix."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise UserError(f"{path}: exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            raise UserError(f"{path}: folder exists and is not empty (pass --overwrite to replace the run in it)")
        if clear:
            for pattern in RUN_ARTIFACTS:
                for old in path.glob(pattern):
                    old.unlink()
            for sub in path.glob("plugins"):
                shutil.rmtree(sub, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_regime(regime: str, environ: Mapping[str, str]) -> str:
    """The regime name to record: the one asked for, else the one the environment amounts to."""
    return regime or infer_regime(environ)


def child_env(regime: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Environment of the worker processes: the regime's NCCL variables (if one was asked for),
    the safety variables always, and PYTHONPATH reaching this checkout of tpscope."""
    env = worker_env(regime, environ) if regime else {**DEFAULT_ENV, **environ, **SAFETY_ENV}
    paths = [_REPO_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def torchrun_command(nproc: int, module: str, module_args: list[str]) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE ARGS`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", module, *module_args]


def launch(nproc: int, module: str, module_args: list[str], regime: str) -> int:
    """Run the workers under torchrun on this node and return its exit code."""
    env = child_env(regime, os.environ)
    return subprocess.call(torchrun_command(nproc, module, module_args), env=env)
