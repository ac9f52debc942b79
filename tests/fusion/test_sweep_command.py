"""`tpscope sweep`: variants, the comparison, and a CPU sweep end to end (baseline + one change),
with the analyzer run as a separate process on each run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tpscope.errors import UserError
from tpscope.fusion.sweep_command import Variant, compare, parse_variants

REPO = Path(__file__).resolve().parents[2]


def test_parse_variants():
    assert parse_variants("chunked:2, ring ,auto,regime=shm", "nvlink") == [
        Variant(name="chunked-k2", mode="chunked", chunks=2, regime="nvlink"),
        Variant(name="ring-k1", mode="ring", chunks=1, regime="nvlink"),
        Variant(name="auto", mode="auto", chunks=4, regime="nvlink"),
        Variant(name="none-shm", mode="none", chunks=1, regime="shm"),
    ]
    for bad in ("fast", "chunked:x", "regime=ib"):
        with pytest.raises(UserError):
            parse_variants(bad, "")


def test_compare_is_relative_to_the_baseline():
    rows = [{"run": "00-none", "regime": "shm", "mode": "none", "tokens_per_s": 100.0, "peak_memory_bytes": 2**30,
             "analyze": {"exposed_comm_ratio": 0.5, "contention_slowdown": None}},
            {"run": "01-chunked-k8", "regime": "shm", "mode": "chunked", "tokens_per_s": 125.0,
             "peak_memory_bytes": None, "analyze": None}]
    table = compare(rows)
    assert "| 00-none | shm | none | 100 | 1.000× | 0.500 | – | 1.00 |" in table
    assert "| 01-chunked-k8 | shm | chunked | 125 | 1.250× | – | – | – |" in table


def test_cpu_sweep_end_to_end(tmp_path):
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "tpscope.cli", "sweep", "--device", "cpu", "--variants", "ring:2", "--out", str(out),
           "--steps", "3", "--profile-steps", "1", "--layers", "1", "--hidden", "32", "--ffn", "64", "--heads", "2",
           "--vocab", "32", "--seq-len", "16", "--batch", "2", "--timeout-s", "60"]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=200, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert [r["run"] for r in doc["runs"]] == ["00-none", "01-ring-k2"]
    assert doc["runs"][1]["fusion_by_layer"]["block0.mlp.fc1"] == {"mode": "ring", "chunks": 2}
    for r in doc["runs"]:
        assert r["tokens_per_s"] > 0
        assert r["analyze"] is not None, r["analyze_note"]  # the analyzer read the run folder
    assert "| 01-ring-k2 |" in (out / "sweep.md").read_text()
