"""`tpscope bench --device cpu`: the table, the JSON (timings, E, the output check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tpscope.cli", "bench", *args],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=150,
        cwd=REPO,
    )


def test_cpu_bench_writes_checked_results(tmp_path):
    out = tmp_path / "b" / "bench.json"
    done = _bench(
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--shape",
        "32,16,32",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--chunks",
        "2,3",
        "--ring-chunks",
        "1,2",
        "--out",
        str(out.parent),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "unfused" in done.stdout and "chunked/k2" in done.stdout
    doc = json.loads(out.read_text())
    assert (
        doc["all_outputs_match_unfused"] is True
        and doc["tp"] == 2
        and doc["command"][:2] == ["tpscope", "bench"]
    )
    sides = {r["side"]: r for r in doc["results"]}
    assert set(sides) == {"ag", "rs"}
    for r in sides.values():
        # k=3 does not divide the 16 rows per rank
        assert [(v["mode"], v["chunks"]) for v in r["variants"]] == [
            ("chunked", 2),
            ("ring", 1),
            ("ring", 2),
        ]
        for v in r["variants"]:
            assert v["timing"]["reps"] == 3 and v["max_rel_err"] < 1e-4 and "E" in v


def test_bench_json_is_a_flag_and_out_a_folder(tmp_path):
    """`--json FILE` (a value to the flag) and `--out FILE.json` are refused with the folder form,
    before any rank starts; an existing bench.json is kept without --overwrite."""
    done = _bench("--device", "cpu", "--json", str(tmp_path / "b.json"))
    assert done.returncode == 2 and "--json is a flag" in done.stderr and "--out DIR" in done.stderr
    assert done.stderr.count("\n") == 1
    done = _bench("--device", "cpu", "--out", str(tmp_path / "b.json"))
    assert done.returncode == 2 and "bench.json" in done.stderr and "folder" in done.stderr
    (tmp_path / "bench.json").write_text("{}")
    done = _bench("--device", "cpu", "--out", str(tmp_path))
    assert done.returncode == 2 and "--overwrite" in done.stderr
    assert (tmp_path / "bench.json").read_text() == "{}"


def test_bench_refuses_bad_options():
    done = _bench("--device", "cpu", "--shape", "huge")
    assert done.returncode == 2 and "S,H,F" in done.stderr
    done = _bench("--device", "cpu", "--modes", "symm_mem")
    assert done.returncode == 2 and "cuda" in done.stderr
    done = _bench("--device", "cpu", "--modes", "symm_mem,copy_engine")
    assert done.returncode == 2 and "cuda" in done.stderr
    for option, value in (
        ("--taper", "2"),
        ("--ring-all-gather", "0,3"),
        ("--copy-push", "5"),
        ("--feed-ahead-ms", "-1"),
    ):
        done = _bench("--device", "cpu", option, value)
        assert done.returncode == 2 and option in done.stderr, (option, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1


def test_bench_refuses_more_ranks_than_gpus_in_one_line():
    """A rank per GPU: with fewer GPUs than ranks (none on this CPU machine, one on a one-GPU one)
    the bench says so before any rank starts, instead of a CUDA error from the second rank."""
    import torch

    seen = torch.cuda.device_count()
    asked = max(2, seen + 1)
    done = _bench("--nproc", str(asked), "--shape", "32,16,32")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"needs {asked} GPUs" in done.stderr and f"torch sees {seen}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = _bench("--device", "cpu", "--nproc", "1")
    assert done.returncode == 2 and "2 or more" in done.stderr


def test_every_option_default_is_bench_configs():
    """No option restates a default: `tpscope bench` with no option is BenchConfig's defaults."""
    import argparse

    from tpscope.fusion.tuning.bench_command import add_arguments, config_from_args
    from tpscope.fusion.tuning.bench_config import BenchConfig

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert config_from_args(parser.parse_args([])) == BenchConfig()
    assert config_from_args(parser.parse_args(["--taper", "0,1"])).tapers == (False, True)
