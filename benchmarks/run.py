"""Run a named benchmark recipe (benchmarks/recipes.py) and record it as one result folder.

    PYTHONPATH=. python benchmarks/run.py RECIPE [--out DIR]   # from the repository root
    python benchmarks/run.py --list
    python benchmarks/run.py --readme DIR                      # rewrite DIR/README.md from its files

Each step runs through the public CLI (`python -m tpscope.cli ...`) or a script of benchmarks/,
with NVLink multicast off (recipes.MULTICAST_OFF) and its own time limit. The result folder
(default benchmarks/results/RECIPE-YYYY-MM-DD) gets every step's JSON and run folders, `log.txt`
(the steps' output), `result.json` (recipe, commands, versions, date, each step's exit status and
seconds) and `README.md` (the same in words, with the tables of tables.py). Sweeps run without the
analyzer (a GPU machine may not have its libraries); on a machine that has them,
`--readme DIR --analyze` adds the analyzer's figures to each sweep's table.

Exit status: 0 every step succeeded, 1 a step failed or ran out of time (the folder is still
written), 2 a mistake in the options (one line on stderr).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from recipes import BY_NAME, HARDWARE, MULTICAST_OFF, Recipe, Step  # noqa: E402
from tables import folder_tables  # noqa: E402

VERSIONS_PY = """import json, platform, sys
v = {"python": sys.version.split()[0], "platform": platform.platform()}
try:
    import torch
    v["torch"] = torch.__version__
    v["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        v["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
except ImportError:
    v["torch"] = None
try:
    import tpscope
    v["tpscope"] = tpscope.__version__
except (ImportError, AttributeError):
    pass
print(json.dumps(v))
"""


class UsageError(Exception):
    """A mistake in the options: one line, exit 2."""


def command(step: Step, out: Path) -> list[str]:
    """The argv of one step, `{out}` replaced by the result folder."""
    args = [a.replace("{out}", str(out)) for a in step.argv]
    if step.program == "tpscope":
        return [sys.executable, "-m", "tpscope.cli", *args]
    if step.torchrun:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            *step.torchrun,
            str(HERE / step.program),
            *args,
        ]
    return [sys.executable, str(HERE / step.program), *args]


def step_env(step: Step, out: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment of one step: the caller's, the source tree on PYTHONPATH, multicast off,
    and the step's own variables."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(MULTICAST_OFF)
    env.update({k: v.replace("{out}", str(out)) for k, v in step.env})
    return env


def shown(step: Step, out: Path) -> str:
    """A step as a shell line a reader can paste (from the repository root, PYTHONPATH=.)."""
    prog = (
        "python -m tpscope.cli"
        if step.program == "tpscope"
        else f"python benchmarks/{step.program}"
    )
    if step.torchrun:
        prog = (
            f"python -m torch.distributed.run {' '.join(step.torchrun)} benchmarks/{step.program}"
        )
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in step.env)
    args = " ".join(shlex.quote(a.replace("{out}", str(out))) for a in step.argv)
    return f"{env + ' ' if env else ''}{prog} {args}"


def versions() -> dict:
    """Python, torch, CUDA, NCCL, the GPUs and tpscope as a child process sees them, plus the
    driver (nvidia-smi) and the source's git commit where there are."""
    done = subprocess.run(
        [sys.executable, "-c", VERSIONS_PY],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    v = json.loads(done.stdout) if done.returncode == 0 else {"python": platform.python_version()}
    for key, argv in (
        ("driver", ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        ("commit", ["git", "-C", str(ROOT), "rev-parse", "HEAD"]),
    ):
        try:
            got = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if got.returncode == 0 and got.stdout.strip():
            v[key] = got.stdout.strip().splitlines()[0]
    v["cpus"] = os.cpu_count()
    return v


def run_recipe(recipe: Recipe, out: Path, log=sys.stdout) -> dict:
    """Run every step of a recipe into `out`; the record of result.json."""
    out.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.timezone.utc)
    record = {
        "recipe": recipe.name,
        "hardware": HARDWARE[recipe.hardware],
        "regime": recipe.regime,
        "shape": recipe.shape,
        "compares": recipe.compares,
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions(),
        "steps": [],
    }
    with open(out / "log.txt", "a") as logf:
        for step in recipe.steps:
            line = shown(step, out)
            print(f"== {line}", file=log, flush=True)
            logf.write(f"== {line}\n")
            logf.flush()
            t0 = time.monotonic()
            try:
                done = subprocess.run(
                    command(step, out),
                    cwd=ROOT,
                    env=step_env(step, out, dict(os.environ)),
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    timeout=step.limit_s,
                )
                rc = done.returncode
            except subprocess.TimeoutExpired:
                rc = 124
            seconds = round(time.monotonic() - t0, 1)
            status = f"exit {rc} after {seconds} s" + (
                f" (limit {step.limit_s} s)" if rc == 124 else ""
            )
            print(f"== {status}", file=log, flush=True)
            logf.write(f"== {status}\n")
            record["steps"].append({"command": line, "exit": rc, "seconds": seconds})
    (out / "result.json").write_text(json.dumps(record, indent=1) + "\n")
    write_readme(out)
    return record


def write_readme(out: Path) -> None:
    """README.md of a result folder from its result.json and recorded files."""
    rec = json.loads((out / "result.json").read_text())
    v = rec["versions"]
    lines = [
        f"# {rec['recipe']}, {rec['date'][:10]}",
        "",
        rec["compares"][0].upper() + rec["compares"][1:] + ".",
        "",
        f"- **Recipe:** `{rec['recipe']}` (`PYTHONPATH=. python benchmarks/run.py {rec['recipe']}`)",
        f"- **Hardware:** {rec['hardware']}; seen: {', '.join(v.get('gpus') or []) or 'no GPU'}, "
        f"{v.get('cpus')} CPUs",
        f"- **Regime:** {rec['regime']}",
        f"- **Shape:** {rec['shape']}",
        f"- **Date:** {rec['date']}",
        "- **Versions:** "
        + ", ".join(
            f"{k} {v[k]}"
            for k in ("python", "torch", "cuda", "nccl", "driver", "tpscope", "commit")
            if v.get(k)
        ),
        "- **Environment:** "
        + " ".join(f"{k}={val}" for k, val in MULTICAST_OFF.items())
        + " in every step",
        "",
        "## Commands",
        "",
        "Run from the repository root with `PYTHONPATH=.`:",
        "",
        "```",
    ]
    lines += [s["command"] for s in rec["steps"]]
    lines += ["```", ""]
    failed = [s for s in rec["steps"] if s["exit"] != 0]
    lines.append(
        "Every step exited 0."
        if not failed
        else "**Failed steps:** "
        + "; ".join(f"`{s['command'][:80]}` exit {s['exit']}" for s in failed)
    )
    for title, table in folder_tables(out):
        lines += ["", f"## {title}", "", table]
    (out / "README.md").write_text("\n".join(lines) + "\n")


def analyze_sweeps(out: Path) -> None:
    """Add `tpscope analyze`'s summary to every run of every sweep of a result folder (a machine
    with the analyzer's libraries)."""
    for path in sorted(out.glob("*/sweep.json")):
        doc = json.loads(path.read_text())
        for row in doc["runs"]:
            run_dir = path.parent / row["run"]
            done = subprocess.run(
                [sys.executable, "-m", "tpscope.cli", "analyze", str(run_dir), "--json"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            if done.returncode == 0:
                row["analyze"] = json.loads(done.stdout).get("summary")
                row["analyze_note"] = None
        path.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.splitlines()[0])
    p.add_argument("recipe", nargs="?", help="a recipe's name (--list shows them)")
    p.add_argument(
        "--out", type=Path, help="result folder (default benchmarks/results/RECIPE-YYYY-MM-DD)"
    )
    p.add_argument("--list", action="store_true", help="list the recipes")
    p.add_argument(
        "--readme", type=Path, metavar="DIR", help="rewrite DIR/README.md from its files"
    )
    p.add_argument(
        "--analyze",
        action="store_true",
        help="with --readme: run the analyzer on DIR's sweeps first",
    )
    args = p.parse_args(argv)
    try:
        if args.list:
            for r in BY_NAME.values():
                print(f"{r.name:24s} {r.hardware:7s} {r.regime:11s} {r.compares}")
            return 0
        if args.readme:
            if not (args.readme / "result.json").is_file():
                raise UsageError(
                    f"--readme {args.readme}: no result.json there (not a folder run.py wrote)"
                )
            if args.analyze:
                analyze_sweeps(args.readme)
            write_readme(args.readme)
            print(f"wrote {args.readme / 'README.md'}")
            return 0
        if args.recipe not in BY_NAME:
            raise UsageError(
                f"RECIPE {args.recipe!r}: not a recipe (one of {', '.join(BY_NAME)})"
                if args.recipe
                else "give a RECIPE (--list shows them)"
            )
        recipe = BY_NAME[args.recipe]
        out = args.out or HERE / "results" / f"{recipe.name}-{dt.date.today().isoformat()}"
        if out.exists() and any(out.iterdir()):
            raise UsageError(f"--out {out}: exists and is not empty (give another folder)")
    except UsageError as e:
        print(f"benchmarks/run.py: error: {e}", file=sys.stderr)
        return 2
    record = run_recipe(recipe, out.resolve())
    print(f"wrote {out / 'README.md'}")
    return 0 if all(s["exit"] == 0 for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
