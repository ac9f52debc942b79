"""metrics.md §6: clock offsets of ranks on different hosts, recovered from collective ends."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tests.metrics._jobs import tp_dp, tp_pp
from tpscope.metrics import analyze_run
from tpscope.trace import load_run

SHIFT_US = 1234.567  # rank 1's clock runs this far ahead of rank 0's
AG = Collective("_allgather_base", group_size=2)


def _two_hosts(tmp_path, host0="node-a", host1="node-b", jitter=(0.0, 0.4, -0.3, 0.2, 0.1)):
    """Five all-gathers; rank 1 enters each 7 µs late in true time; ends agree up to `jitter` µs."""
    r0, r1 = RankTrace(0, hostname=host0), RankTrace(1, hostname=host1)
    for k, j in enumerate(jitter):
        t = 1000.0 * k
        r0.kernel("gemm", t, 50)
        r0.kernel("ncclDevKernel_AllGather", t + 50, 60, stream=14, collective=AG)
        r1.kernel("gemm", t + SHIFT_US, 57)
        r1.kernel("ncclDevKernel_AllGather", t + SHIFT_US + 57, 53 + j, stream=14, collective=AG)
    return load_run(write_run(tmp_path / "run", [r0, r1]))


def test_offset_between_hosts_is_recovered_within_1us(tmp_path):
    a = analyze_run(_two_hosts(tmp_path))
    assert a.clock_offsets_us[0] == 0.0
    assert a.clock_offsets_us[1] == pytest.approx(SHIFT_US, abs=1.0)
    # on the aligned clock rank 0 waits the 7 µs rank 1 is late, in each of 5 collectives
    rank0 = next(s for s in a.steps if s.rank == 0)
    assert rank0.comm_wait_us == pytest.approx(5 * 7.0, abs=1.0)
    assert all(c.skew_us == pytest.approx(7.0, abs=1.0) for c in a.collectives)


def test_one_host_shares_one_clock(tmp_path):
    a = analyze_run(_two_hosts(tmp_path, host0="node-a", host1="node-a"))
    assert a.clock_offsets_us == {0: 0.0, 1: 0.0}
    assert all(c.skew_us == pytest.approx(SHIFT_US + 7.0, abs=0.01) for c in a.collectives)


def test_traces_without_host_names_are_taken_as_one_host(tmp_path):
    a = analyze_run(_two_hosts(tmp_path, host0=None, host1=None))
    assert a.clock_offsets_us == {0: 0.0, 1: 0.0}


def test_align_all_aligns_even_on_one_host(tmp_path):
    a = analyze_run(_two_hosts(tmp_path, host0="node-a", host1="node-a"), align="all")
    assert a.clock_offsets_us[1] == pytest.approx(SHIFT_US, abs=1.0)


def test_host_without_shared_collective_keeps_its_clock_with_a_warning(tmp_path):
    r0, r1 = RankTrace(0, hostname="node-a"), RankTrace(1, hostname="node-b")
    r0.kernel("gemm", 0, 50)
    r1.kernel("gemm", SHIFT_US, 50)
    a = analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))
    assert a.clock_offsets_us == {0: 0.0, 1: 0.0}
    assert any("not aligned" in w for w in a.warnings)


def test_ranks_of_one_host_share_its_offset(tmp_path):
    """Ranks 0, 1 on node-a; ranks 2, 3 on node-b, whose clock is SHIFT_US ahead."""
    ag = Collective("_allgather_base", group_size=4)
    ranks = []
    for rank in range(4):
        shift = SHIFT_US if rank >= 2 else 0.0
        r = RankTrace(rank, world_size=4, hostname="node-b" if rank >= 2 else "node-a")
        for k in range(3):
            start = 1000.0 * k + 3.0 * rank  # rank r enters 3r µs late (true time)
            r.kernel(
                "ncclDevKernel_AllGather",
                start + shift,
                100 - 3.0 * rank + 0.1 * k * (rank % 2),
                stream=14,
                collective=ag,
            )
        ranks.append(r)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    assert a.clock_offsets_us[0] == a.clock_offsets_us[1] == 0.0
    assert a.clock_offsets_us[2] == a.clock_offsets_us[3] == pytest.approx(SHIFT_US, abs=1.0)
    assert all(c.skew_us == pytest.approx(9.0, abs=1.0) for c in a.collectives)


# ---- real ranks: skew recovered from the smallest collectives, clocks off on one host -----------

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def test_dp_skew_between_hosts_is_recovered_within_1us(tmp_path):
    shift = 2345.678  # ranks 2 and 3 (node-b) are copies of 0 and 1 with clocks this far ahead
    a = analyze_run(load_run(tp_dp(tmp_path / "job", shift_us=shift)))
    assert a.clock_offsets_us[0] == a.clock_offsets_us[1] == 0.0
    assert a.clock_offsets_us[2] == pytest.approx(shift, abs=1.0)
    assert a.clock_offsets_us[3] == pytest.approx(shift, abs=1.0)
    assert a.clock_residual_us[2] is not None and a.clock_residual_us[2] <= 1.0


def _small_collective_end_gaps(run: Path) -> list[float]:
    """Brute force from the JSON: |end on rank 1 - end on rank 0| of the k-th all-reduce, in µs."""
    ends = {}
    for p in run.iterdir():
        if p.name.endswith(".json.gz"):
            doc = json.loads(gzip.decompress(p.read_bytes()))
            ks = sorted(
                (
                    e
                    for e in doc["traceEvents"]
                    if e.get("cat") == "kernel" and e["args"].get("Collective name") == "allreduce"
                ),
                key=lambda e: e["ts"],
            )
            ends[doc["distributedInfo"]["rank"]] = [e["ts"] + e["dur"] for e in ks]
    return [abs(b - a) for a, b in zip(ends[0], ends[1])]


@pytest.mark.parametrize("run", ["h200x2-shm-none", "h200x2-nvlink-none"])
def test_align_all_on_one_host_finds_about_zero(run):
    """One host, one clock: the small all-reduces end within ~1 µs of each other, so the estimate
    from the smallest collectives is within 1 µs of 0 (the largest collectives end up to 66 µs apart)."""
    gaps = _small_collective_end_gaps(SAMPLES / run)
    assert gaps and max(gaps) < 1.5
    a = analyze_run(load_run(SAMPLES / run), align="all")
    assert abs(a.clock_offsets_us[1]) <= 1.0
    assert a.clock_residual_us[1] <= 1.0


def _shifted_copy(src: Path, dst: Path, rank: int, shift_us: float) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        if p.name.endswith(".json.gz"):
            doc = json.loads(gzip.decompress(p.read_bytes()))
            if doc["distributedInfo"]["rank"] == rank:
                for e in doc["traceEvents"]:
                    if "ts" in e and e.get("ph") == "X":
                        e["ts"] = float(e["ts"]) + shift_us
            (dst / p.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


def test_a_clock_10s_off_on_one_host_is_aligned_with_a_warning(tmp_path):
    run = load_run(_shifted_copy(SAMPLES / "h200x2-nvlink-none", tmp_path / "run", 1, 10e6))
    a = analyze_run(run)
    assert any("clocks disagree by more than a step" in w for w in a.warnings), a.warnings
    assert a.clock_offsets_us[1] == pytest.approx(10e6, abs=1.0)
    longest = max((r.gpu.end_ns.max() - r.gpu.start_ns.min()) / 1e3 for r in run.ranks)
    assert a.critical_path and all(p.length_us <= longest for p in a.critical_path)


def test_a_pipeline_stage_off_by_10s_is_aligned_through_send_recv(tmp_path):
    """TP x PP: stage 1 (ranks 2, 3) shares no collective with rank 0 but send/recv; its clock 10 s
    ahead is found from the send/recv ends (rank 2) and through rank 2 (rank 3)."""
    folder = tp_pp(tmp_path / "job")
    for p in folder.iterdir():
        doc = json.loads(gzip.decompress(p.read_bytes()))
        if doc["distributedInfo"]["rank"] >= 2:
            for e in doc["traceEvents"]:
                if "ts" in e and e.get("ph") == "X":
                    e["ts"] = float(e["ts"]) + 10e6
            p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    run = load_run(folder)
    a = analyze_run(run)
    assert any("clocks disagree by more than a step" in w for w in a.warnings), a.warnings
    for r in (2, 3):  # send and receive end within a transfer of each other: tens of µs
        assert a.clock_offsets_us[r] == pytest.approx(10e6, abs=50.0)
        assert a.clock_residual_us[r] is not None
    longest = max((r.gpu.end_ns.max() - r.gpu.start_ns.min()) / 1e3 for r in run.ranks)
    assert a.critical_path and all(p.length_us <= longest for p in a.critical_path)
