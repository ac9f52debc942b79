"""The run's findings (tpscope/report/findings.py): on a hand-made analyzer document whose costs are
worked out here, and on a sample run against its JSON, in `analyze`'s terminal output and in
`report`'s Markdown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tpscope.cli import main
from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.findings import MIN_SHARE, findings
from tpscope.trace import load_run

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "h200x2-shm-chunked"
CPU_DDP = Path(__file__).resolve().parents[1] / "data" / "foreign-cpu" / "ddp"
GPU_WORDS = re.compile(r"GPU|CUDA|kernel|\bSMs?\b|launch")


def _step(rank, step, exposed, wait, compute, first=False):
    return {
        "rank": rank,
        "step": step,
        "step_time_us": 10_000.0,
        "compute_us": compute,
        "comm_us": exposed + 1000.0,
        "memory_us": 0.0,
        "idle_us": 100.0,
        "hidden_comm_us": 1000.0,
        "exposed_comm_us": exposed,
        "comm_wait_us": wait,
        "first_step": first,
    }


def _doc():
    steps = [
        _step(0, 1, 9000.0, 9000.0, 100.0, first=True),  # the warm-up: left out
        _step(1, 1, 9000.0, 0.0, 100.0, first=True),
        _step(0, 2, 3000.0, 2500.0, 6000.0),
        _step(0, 3, 3200.0, 2700.0, 6000.0),
        _step(1, 2, 600.0, 100.0, 8000.0),  # rank 1 arrives last: it computes 2,000 µs more
        _step(1, 3, 600.0, 100.0, 8000.0),
    ]
    coll = [
        {"step": 2, "key": "0/all_gather/0", "collective": "all_gather", "bytes": 1 << 20,
         "exposed_us": 1500.0, "wait_us": 1200.0, "group": "tp"},
        {"step": 3, "key": "0/all_gather/0", "collective": "all_gather", "bytes": 1 << 20,
         "exposed_us": 1700.0, "wait_us": 1300.0, "group": "tp"},
        {"step": 2, "key": "0/reduce_scatter/1", "collective": "reduce_scatter", "bytes": 1 << 20,
         "exposed_us": 40.0, "wait_us": 0.0, "group": "tp"},  # under 0.5% of the step: dropped
        {"step": 1, "key": "0/reduce_scatter/1", "collective": "reduce_scatter", "bytes": 1 << 20,
         "exposed_us": 9000.0, "wait_us": 0.0, "group": "tp"},  # the warm-up: not counted
    ]  # fmt: skip
    paths = [
        {"step": s, "length_us": 10_000.0, "comm_us": 100.0, "host_us": h, "idle_us": 0.0,
         "host_ops_us": {"aten::copy_": h}, "first_step": s == 1}
        for s, h in ((1, 5000.0), (2, 400.0), (3, 600.0))
    ]  # fmt: skip
    gemm = [
        {"shape": "1024×4096×8192 BFloat16", "baseline_us": 100.0, "same_sm_us": 120.0,
         "overlapped_median_us": 150.0, "slowdown": 0.5, "n_overlapped": 40, "n_isolated": 20,
         "tax_us_per_step": 700.0},
    ]  # fmt: skip
    return {
        "steps": steps,
        "collectives": coll,
        "critical_path": paths,
        "gemm_contention": gemm,
        "summary": {"exposed_comm_ratio": 0.185, "critical_path_exposed_comm_ratio": 0.01},
        "first_step_included": False,
    }


def test_costs_per_step_largest_first_without_the_first_step():
    found = findings(_doc(), headroom=[("all TP communication hidden", 1.31)])
    by_kind = {f.kind: f for f in found}
    # exposed: the mean over ranks and steps 2, 3 of exposed_comm_us
    assert by_kind["exposed_comm"].cost_us == pytest.approx((3000 + 3200 + 600 + 600) / 4)
    # the two shares differ by more than 5 pp: the line says why, with the mean wait
    assert "18.5%" in by_kind["exposed_comm"].title
    assert "1,350 µs of the exposed time is ranks waiting" in by_kind["exposed_comm"].text
    # rank 1 waits least; the others wait (2500 + 2700) / 2 - 100 µs more; it computes 2,000 µs more
    late = by_kind["late_rank"]
    assert late.title.startswith("Rank 1 arrives last") and late.cost_us == pytest.approx(2500.0)
    assert "rank 1 computes 2,000 µs more per step" in late.text
    # the collective: its exposed time over the counted steps 2, 3; the warm-up's 9,000 µs not in it
    (coll,) = [f for f in found if f.kind == "collective"]
    assert coll.cost_us == pytest.approx((1500 + 1700) / 2) and coll.sel["key"] == "0/all_gather/0"
    assert coll.step == 3
    # the GEMM: 700 µs/step, split by the medians: (120-100)/(150-100) of it from fewer SMs
    gemm = by_kind["gemm_tax"]
    assert gemm.cost_us == 700.0 and "280 µs is from running on fewer SMs" in gemm.text
    assert gemm.sel == {"kind": "gemm", "key": "1024×4096×8192 BFloat16"}
    # host on the critical path: steps 2, 3 only
    assert by_kind["host"].cost_us == pytest.approx(500.0)
    assert "Time the GPU waits for the CPU to launch work" in by_kind["host"].text
    costs = [f.cost_us for f in found if f.cost_us is not None]
    assert costs == sorted(costs, reverse=True) and min(costs) >= MIN_SHARE * 10_000
    assert found[-1].kind == "headroom" and "at most 1.31x" in found[-1].title


def test_a_sample_run_s_findings_in_analyze_and_report(tmp_path, capsys):
    doc = as_json(analyze_run(load_run(SAMPLE)))
    found = findings(doc)
    counted = [s for s in doc["steps"] if not s["first_step"]]
    exposed = sum(s["exposed_comm_us"] for s in counted) / len(counted)
    (top,) = [f for f in found if f.kind == "exposed_comm"]
    assert top.cost_us == pytest.approx(exposed)
    assert f"{exposed:,.0f} µs per step" in top.title
    assert main(["analyze", str(SAMPLE), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "What matters in this run" in text and f"1. {found[0].title}." in text
    assert text.index("What matters") < text.index("Per rank and step")
    assert main(["report", str(SAMPLE)]) == 0
    md = capsys.readouterr().out
    assert "### What matters in this run" in md and f"1. **{found[0].title}.**" in md


def test_a_cpu_run_s_findings_say_what_ran_there():
    """A CPU run (no GPU, its activities CPU threads' ops): its host time on the critical path is
    said as its threads' time between ops, and no finding speaks of a GPU, kernels or launches."""
    doc = {**_doc(), "cpu_run": True, "gemm_contention": []}  # §8 measures GPU kernels only
    found = findings(doc)
    (host,) = [f for f in found if f.kind == "host"]
    assert host.cost_us == pytest.approx(500.0)  # (400 + 600) / 2: steps 2 and 3
    assert host.title == (
        "Between ops: the critical path spends 500 µs per step on CPU threads outside their ops"
    )
    assert (
        "between its innermost CPU ops" in host.text and "most in aten::copy_ 500 µs" in host.text
    )
    texts = [f.title + " " + f.text for f in found]
    assert [t for t in texts if GPU_WORDS.search(t)] == []
    # a late rank with no longer class of work of its own: look at its threads
    same = [dict(s, compute_us=6000.0) for s in doc["steps"]]
    late = [f for f in findings({**doc, "steps": same}) if f.kind == "late_rank"]
    assert "look at its threads between their ops on the Timeline" in late[0].text
    gpu_late = [
        f for f in findings({**doc, "steps": same, "cpu_run": False}) if f.kind == "late_rank"
    ]
    assert "look at its host (CPU) side on the Timeline" in gpu_late[0].text


def test_a_recorded_cpu_run_s_findings_name_cpu_threads_not_the_gpu():
    doc = as_json(analyze_run(load_run(CPU_DDP)))
    assert doc["cpu_run"]
    found = findings(doc)
    counted = [p for p in doc["critical_path"] if not p["first_step"]]
    host_us = sum(p["host_us"] for p in counted) / len(counted)
    (host,) = [f for f in found if f.kind == "host"]
    assert host.cost_us == pytest.approx(host_us)
    assert f"spends {host_us:,.0f} µs per step on CPU threads outside their ops" in host.title
    texts = [f.title + " " + f.text for f in found]
    assert [t for t in texts if GPU_WORDS.search(t)] == []
