"""benchmarks/tables.py on hand-built results whose tables are known."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from tables import best_table, folder_tables, manifests_table, rows_table, sweep_table  # noqa: E402


def _t(ms):
    return {"median_ms": ms, "p10_ms": ms - 0.1, "p90_ms": ms + 0.1}


def _bench(regime):
    v = [
        {
            "mode": "chunked",
            "chunks": 4,
            "own_first": True,
            "ok": True,
            "timing": _t(3.0),
            "E": 0.5,
            "attained_saving": 0.6,
            "speedup_vs_unfused": 1.3,
            "max_rel_err": 0.0,
        },
        {
            "mode": "ring",
            "chunks": 1,
            "ok": False,
            "timing": _t(1.0),
            "E": 0.9,  # fastest, but wrong
            "attained_saving": 0.9,
            "speedup_vs_unfused": 3.0,
            "max_rel_err": 0.5,
        },
        {
            "mode": "symm_mem",
            "chunks": 1,
            "ok": True,
            "timing": _t(2.0),
            "E": 0.7,
            "attained_saving": 0.8,
            "speedup_vs_unfused": 1.9,
            "max_rel_err": 0.0,
        },
    ]
    return {
        "regime": regime,
        "results": [
            {
                "side": "ag",
                "S": 8,
                "H": 4,
                "F": 16,
                "gemm": _t(1.5),
                "comm": _t(2.5),
                "unfused": _t(4.0),
                "variants": v,
            }
        ],
    }


def test_best_variant_is_the_fastest_correct_one_and_not_symm_mem_off_nvlink():
    nv = best_table({"nvlink": _bench("nvlink")}).splitlines()[2]
    shm = best_table({"shm": _bench("shm")}).splitlines()[2]
    assert "| symm_mem | 2.000 |" in nv
    assert "| chunked k=4 | 3.000 |" in shm


def test_sweep_ratios_are_against_the_first_run():
    doc = {
        "runs": [
            {"run": "00-none", "mode": "none", "tokens_per_s": 1000.0},
            {"run": "01-auto", "mode": "auto", "tokens_per_s": 1234.0},
        ]
    }
    rows = sweep_table(doc).splitlines()[2:]
    assert rows == ["| 00-none | none | 1,000 | 1.000× |", "| 01-auto | auto | 1,234 | 1.234× |"]


def test_manifests_table_loss_fall_and_difference_from_unfused():
    base = [10.0] * 5 + [8.0] * 5
    cand = [10.0] * 5 + [8.0] * 4 + [8.4]  # last step 5 % off unfused's
    m = {
        "tp2-none": {"tp": 2, "mode": "none", "losses": base, "tokens_per_s": 200.0},
        "tp2-ring": {"tp": 2, "mode": "ring", "losses": cand, "tokens_per_s": 220.0},
    }
    none_row, ring_row = manifests_table(m).splitlines()[2:]
    assert "| 10.0000 → 8.0000 | 20.0 % | – |" in none_row
    assert "| 10.0000 → 8.0800 | 19.2 % | 5.00e-02 |" in ring_row
    assert "| 220 | 110 |" in ring_row


def test_rows_table_flattens_one_level():
    t = rows_table(
        [{"case": "a", "x": {"s": 1.5, "mb": 2}}, {"case": "b", "x": {"s": None}}]
    ).splitlines()
    assert t[0] == "| case | x.s | x.mb |"
    assert t[2:] == ["| a | 1.500 | 2 |", "| b | – | – |"]


def test_folder_tables_finds_benches_sweeps_and_runs(tmp_path):
    (tmp_path / "bench.json").write_text(json.dumps(_bench("shm")))
    (tmp_path / "sweep-x").mkdir()
    (tmp_path / "sweep-x" / "sweep.json").write_text(
        json.dumps({"runs": [{"run": "00-none", "mode": "none", "tokens_per_s": 5.0}]})
    )
    (tmp_path / "run-a").mkdir()
    (tmp_path / "run-a" / "tpscope_run.jsonc").write_text(
        json.dumps({"tp": 1, "mode": "none", "losses": [1.0]})
    )
    (tmp_path / "bench-nvlink").mkdir()  # `tpscope bench --out {out}/bench-nvlink`
    (tmp_path / "bench-nvlink" / "bench.json").write_text(json.dumps(_bench("nvlink")))
    (tmp_path / "notes.json").write_text("[1, 2]")  # not a result: no table
    titles = [t for t, _ in folder_tables(tmp_path)]
    assert titles == [
        "`bench.json`: best fused variant per shape and side (shm)",
        "`bench.json`: every variant",
        "`bench-nvlink/bench.json`: best fused variant per shape and side (nvlink)",
        "`bench-nvlink/bench.json`: every variant",
        "`sweep-x/sweep.json`: tokens/s against the sweep's unfused run",
        "training runs (`tpscope run` folders)",
    ]
