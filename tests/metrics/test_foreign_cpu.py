"""CPU jobs written with PyTorch's own APIs (DDP, FSDP2, TP with sequence parallel, pipelining, a
2-D mesh, a straggler; `tests/data/foreign-cpu/make.py`), each checked against answers worked out
here from the raw JSON, without tpscope's code (metrics.md §1 "CPU runs", §4, §5):

- compute: per thread, the time whose innermost CPU op is an operator that does work (`aten::mm`,
  not `c10d::allreduce_`, `autograd::engine::...` or an autograd node such as `AddmmBackward0`):
  the self time of the ops, by a stack walk over each thread's ops in start order, outside
  gloo's collectives;
- communication: gloo's collective ranges and the blocking waits;
- the summary ratios of §4 from those unions per rank and step;
- wait + transfer = communication <= the step, per rank and step, on every job and on
  `tests/data/cpu-gloo-tiny` (a `tpscope run --device cpu`);
- bus bandwidth: bytes from the gloo range's `Input Dims` and `Input type`, times the nccl-tests
  factor, over the transfer (last end minus last start of the matched ranges);
- collectives: how many gloo collectives each job runs, which group each belongs to (by the job's
  construction: TP tensors are activations and norm weights, FSDP's the flat parameter shards)
  and the ranks of that group in `pg_config`; reduce-scatters counted from the ops that issue
  them; send/recv pairs from `Concrete Inputs`.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from tpscope.metrics import analyze_run
from tpscope.trace import load_run

DATA = Path(__file__).resolve().parents[1] / "data" / "foreign-cpu"
JOBS = ("ddp", "fsdp2", "tp_sp", "pipeline", "mesh2d", "straggler")
TPSCOPE_CPU = "../cpu-gloo-tiny"  # a `tpscope run --device cpu` (tests/data/README.md)
# namespaces of operators that issue collectives or run the autograd engine or the profiler
NOT_COMPUTE = {"c10d", "_c10d_functional", "c10d_functional", "autograd", "profiler"}
WAITS = ("_c10d_functional::wait_tensor", "c10d_functional::wait_tensor", "c10d::wait")


def _ns(us: float) -> int:
    return round(us * 1000)


@cache
def _ranks(job: str) -> dict[int, dict]:
    out = {}
    for path in sorted((DATA / job).glob("*.pt.trace.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        out[doc["distributedInfo"]["rank"]] = doc
    return out


def _events(doc: dict, cat: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        elif e > s:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(intervals, lo: int, hi: int) -> int:
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in intervals)


def _intersect(a, b):
    out = []
    for s, e in a:
        for s2, e2 in b:
            lo, hi = max(s, s2), min(e, e2)
            if lo < hi:
                out.append((lo, hi))
    return _union(out)


def _self_time(ops: list[dict]) -> list[tuple[dict, int, int]]:
    """(op, start, end) of every stretch of a thread's time whose innermost op is `op`: a stack
    walk over the ops in start order (longest first at one start)."""
    out = []
    by_thread: dict = {}
    for e in ops:
        by_thread.setdefault(e["tid"], []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (_ns(e["ts"]), -_ns(e["ts"] + e["dur"])))
        stack: list[list] = []  # [op, end, resume]: resume is where its own time continues
        for e in [*evs, None]:  # None closes every op still open
            s = _ns(e["ts"]) if e is not None else 2**62
            while stack and stack[-1][1] <= s:
                op, end, resume = stack.pop()
                if end > resume:
                    out.append((op, resume, end))
                if stack:
                    stack[-1][2] = max(stack[-1][2], end)
            if e is None:
                break
            end = _ns(e["ts"] + e["dur"])
            if stack:
                parent = stack[-1]
                if s > parent[2]:
                    out.append((parent[0], parent[2], s))
                end = min(end, parent[1])
                parent[2] = max(parent[2], end)
            stack.append([e, end, s])
    return out


def _is_compute(name: str) -> bool:
    """An operator (`namespace::name`, no spaces) of a namespace that does work, not a wait."""
    namespace, sep, op = name.partition("::")
    return (
        bool(sep)
        and namespace.isidentifier()
        and op.replace(".", "_").isidentifier()
        and namespace not in NOT_COMPUTE
        and not name.startswith(WAITS)
    )


@cache
def reference(job: str) -> dict:
    """Per rank and steady step: (step, compute, comm, hidden) in ns, and the summary ratios."""
    rows = []
    for rank, doc in _ranks(job).items():
        ops = _events(doc, "cpu_op")
        ranges = _events(doc, "user_annotation")
        gloo = [e for e in ranges if e["name"].startswith("gloo:")]
        held = {}  # per thread: the collective ranges whose ops are the collective's work
        for g in gloo:
            if g["name"] not in ("gloo:send", "gloo:recv"):
                held.setdefault(g["tid"], []).append((_ns(g["ts"]), _ns(g["ts"] + g["dur"])))
        compute = [
            (s, e)
            for op, s, e in _self_time(ops)
            if _is_compute(op["name"]) and not any(a <= s <= b for a, b in held.get(op["tid"], []))
        ]
        comm = [(_ns(g["ts"]), _ns(g["ts"] + g["dur"])) for g in gloo] + [
            (_ns(o["ts"]), _ns(o["ts"] + o["dur"])) for o in ops if o["name"].startswith(WAITS)
        ]
        u_compute, u_comm = _union(compute), _union(comm)
        hidden = _intersect(u_compute, u_comm)
        steps = sorted(
            (int(e["name"].split("#")[1]), _ns(e["ts"]), _ns(e["ts"] + e["dur"]))
            for e in ranges
            if e["name"].startswith("ProfilerStep#")
        )
        for step, lo, hi in steps[1:]:  # the first profiled step is left out of the summary
            rows.append(
                (
                    rank,
                    step,
                    hi - lo,
                    _length(u_compute, lo, hi),
                    _length(u_comm, lo, hi),
                    _length(hidden, lo, hi),
                )
            )
    total = Counter()
    for _, _, w, c, m, h in rows:
        total["step"] += w
        total["comm"] += m
        total["hidden"] += h
        total["exposed"] += m - h
        total["hideable"] += min(c, m)
    return {
        "rows": rows,
        "exposed_comm_ratio": total["exposed"] / total["step"],
        "overlap_ratio": total["hidden"] / total["comm"],
        "hidden_of_hideable_ratio": total["hidden"] / total["hideable"],
    }


@cache
def analysis(job: str):
    return analyze_run(load_run(DATA / job, workers=1))


@pytest.mark.parametrize("job", [*JOBS, pytest.param(TPSCOPE_CPU, id="cpu-gloo-tiny")])
def test_compute_is_the_self_time_of_compute_ops(job):
    steps = {(s.rank, s.step): s for s in analysis(job).steps}
    for rank, step, _, compute_ns, comm_ns, _ in reference(job)["rows"]:
        got = steps[(rank, step)]
        assert got.compute_us == pytest.approx(compute_ns / 1000, rel=0.10), (rank, step)
        assert got.comm_us == pytest.approx(comm_ns / 1000, rel=0.10), (rank, step)


@pytest.mark.parametrize("job", JOBS)
def test_summary_ratios_are_the_known_answers(job):
    want, got = reference(job), analysis(job).summary
    for field in ("exposed_comm_ratio", "overlap_ratio", "hidden_of_hideable_ratio"):
        assert getattr(got, field) == pytest.approx(want[field], abs=0.05), field


def _steady_gloo(job: str) -> dict[int, list[dict]]:
    """Per rank: the gloo collectives that start in a steady step (the first left out)."""
    out = {}
    for rank, doc in _ranks(job).items():
        ranges = _events(doc, "user_annotation")
        steps = sorted(
            (_ns(e["ts"]), _ns(e["ts"] + e["dur"]))
            for e in ranges
            if e["name"].startswith("ProfilerStep#")
        )
        lo, hi = steps[1][0], steps[-1][1]
        out[rank] = [e for e in ranges if e["name"].startswith("gloo:") and lo <= _ns(e["ts"]) < hi]
    return out


def _groups(job: str) -> dict[int, dict[str, tuple[int, ...]]]:
    """Per rank: pg_desc -> ranks, from its pg_config."""
    return {
        rank: {g["pg_desc"]: tuple(g["ranks"]) for g in doc["distributedInfo"]["pg_config"]}
        for rank, doc in _ranks(job).items()
    }


TP_SIZES = {
    4 * 32 * 128,
    8 * 32 * 128,
    128,
}  # TP's activations (a sequence half, whole), norm grads


def _size(e: dict) -> int:
    n = 1
    for d in e["args"]["Input Dims"][0]:
        n *= d
    return n


@pytest.mark.parametrize("job", ("ddp", "fsdp2", "tp_sp", "straggler", "mesh2d"))
def test_every_collective_matches_within_its_group(job):
    a = analysis(job)
    steady = [c for c in a.collectives if c.step != min(s.step for s in a.steps)]
    gloo = _steady_gloo(job)
    groups = _groups(job)
    world = sorted(_ranks(job))
    # every collective of every rank is in one instance of its group's size
    want = {}
    for rank, evs in gloo.items():
        for e in evs:
            if job == "mesh2d":
                ranks = groups[rank]["mesh_tp" if _size(e) in TP_SIZES else "mesh_dp"]
            else:
                ranks = tuple(world)
            want[ranks] = want.get(ranks, 0) + 1
    got = Counter()
    for c in steady:
        got[tuple(c.ranks)] += len(c.ranks)
        assert not c.inferred
    assert dict(got) == want
    assert not [w for w in a.warnings if "counterpart" in w or "do not match" in w]
    if job == "mesh2d":  # the group's name and description come from pg_config
        for c in steady:
            desc = "mesh_tp" if c.group.endswith("mesh_tp") else "mesh_dp"
            assert groups[c.ranks[0]][desc] == tuple(c.ranks), c.group


@pytest.mark.parametrize("job", ("fsdp2", "tp_sp", "mesh2d", "ddp"))
def test_reduce_scatters_are_what_their_ops_name(job):
    """Each `c10d::` reduce-scatter op issues one gloo collective (which gloo runs as an
    all-reduce): as many reduce-scatters as those ops, per rank and steady step."""
    a = analysis(job)
    first = min(s.step for s in a.steps)
    n_ops = 0
    for doc in _ranks(job).values():
        ranges = _events(doc, "user_annotation")
        steps = sorted(
            (_ns(e["ts"]), _ns(e["ts"] + e["dur"]))
            for e in ranges
            if e["name"].startswith("ProfilerStep#")
        )
        lo, hi = steps[1][0], steps[-1][1]
        n_ops += sum(
            1
            for e in _events(doc, "cpu_op")
            if e["name"].startswith("c10d::")
            and "reduce_scatter" in e["name"]
            and lo <= _ns(e["ts"]) < hi
        )
    got = sum(
        len(c.ranks) for c in a.collectives if c.step > first and c.collective.endswith("scatter")
    )
    assert got == n_ops
    assert (n_ops > 0) == (job != "ddp")


def test_pipeline_sends_pair_with_receives():
    """From `Concrete Inputs` (the peer of `c10d::send` / `c10d::recv_`): the k-th send from a to
    b in a step pairs with the k-th receive of b from a; every one of them is paired."""
    a = analysis("pipeline")
    first = min(s.step for s in a.steps)
    sends = Counter()
    for rank, doc in _ranks("pipeline").items():
        for e in _events(doc, "cpu_op"):
            if e["name"] == "c10d::send":
                sends[(rank, int(e["args"]["Concrete Inputs"][2]))] += 1
    assert sends == Counter({(0, 1): sends[(0, 1)], (1, 0): sends[(1, 0)]}) and len(sends) == 2
    steady = [c for c in a.collectives if c.step > first]
    n_gloo = sum(len(v) for v in _steady_gloo("pipeline").values())
    assert len(steady) * 2 == n_gloo  # a send and its receive per instance
    assert all(c.collective == "send_recv" and c.ranks == [0, 1] for c in steady)
    assert not [w for w in a.warnings if "counterpart" in w or "matched" in w]
    # the critical path crosses between the stages through them
    assert all({0, 1} <= set(p.ranks) for p in a.critical_path if p.step > first)


def test_the_straggler_makes_its_peer_wait():
    """Rank 1 sleeps 50 ms before each step's first all-reduce: rank 0 waits that long in it."""
    a = analysis("straggler")
    first_of_step = {}
    for c in sorted(a.collectives, key=lambda c: (c.step, c.key)):
        if c.key.endswith("/0"):
            first_of_step.setdefault(c.step, c)
    assert len(first_of_step) == len({s.step for s in a.steps})
    for c in first_of_step.values():
        assert c.wait_us >= 45_000, c


@pytest.mark.parametrize("job", ("fsdp2", "tp_sp", "mesh2d"))
def test_all_gather_bytes_are_their_outputs(job):
    """An all-gather's bytes are its output: its gloo input (4-byte floats) times its group's
    size (2 in every one of these jobs), never the input alone nor times the world."""
    a = analysis(job)
    gathers = [
        e for evs in _steady_gloo(job).values() for e in evs if e["name"] == "gloo:all_gather"
    ]
    want = {4 * _size(e) * 2 for e in gathers}
    first = min(s.step for s in a.steps)
    got = {c.bytes for c in a.collectives if c.step > first and c.collective == "gloo:all_gather"}
    assert got == want and want


def test_the_mesh_critical_path_crosses_only_within_a_group():
    """Each time the 2-D mesh's critical path moves to another rank, the two share a TP or DP
    group of `pg_config` (never ranks of no common group but the world)."""
    groups = {
        frozenset(ranks)
        for by_desc in _groups("mesh2d").values()
        for desc, ranks in by_desc.items()
        if desc != "default_pg"
    }
    crossings = 0
    for path in analysis("mesh2d").critical_path:
        for a, b in zip(path.segments, path.segments[1:]):
            if a["rank"] != b["rank"]:
                crossings += 1
                assert frozenset((a["rank"], b["rank"])) in groups, (path.step, a, b)
    assert crossings > 0


@pytest.mark.parametrize("job", [*JOBS, pytest.param(TPSCOPE_CPU, id="cpu-gloo-tiny")])
def test_wait_and_transfer_are_the_communication_within_the_step(job):
    """Per rank and step (the first too): wait + transfer is the communication (§5), which is a
    union of time inside the step, so never longer than the step; and it is the union of the gloo
    ranges and blocking waits inside the step's `ProfilerStep#N` range, from the raw JSON."""
    rows = {(r, s): (w, comm) for r, s, w, _, comm, _ in reference(job)["rows"]}
    steps = analysis(job).steps
    assert steps
    for s in steps:
        assert s.comm_wait_us + s.comm_transfer_us == pytest.approx(s.comm_us, abs=0.002), s
        assert s.comm_wait_us >= 0 and s.comm_transfer_us >= 0
        assert s.comm_us <= s.step_time_us + 0.002, s
        if (s.rank, s.step) in rows:
            window_ns, comm_ns = rows[(s.rank, s.step)]
            assert comm_ns <= window_ns
            assert s.comm_us == pytest.approx(comm_ns / 1000, rel=0.10), (s.rank, s.step)


ELEMENT_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8}


def test_gloo_bus_bandwidth_is_bytes_times_the_factor_over_the_transfer():
    """tp_sp's all-gathers, worked out from the raw JSON: the k-th `gloo:all_gather` of a step on
    each of the 2 ranks is one instance; bytes = its input's elements x element size x 2 (an
    all-gather's output), transfer = the last end minus the last start (clocks agree: one host),
    busbw = bytes x (n-1)/n / transfer (nccl-tests' factor for an all-gather of n = 2)."""
    a = analysis("tp_sp")
    assert all(v == 0.0 for v in a.clock_offsets_us.values())
    per_rank = {}
    for doc in _ranks("tp_sp").values():
        ranges = _events(doc, "user_annotation")
        steps = sorted(
            (int(e["name"].split("#")[1]), _ns(e["ts"]), _ns(e["ts"] + e["dur"]))
            for e in ranges
            if e["name"].startswith("ProfilerStep#")
        )
        gathers = sorted(
            (e for e in ranges if e["name"] == "gloo:all_gather"), key=lambda e: _ns(e["ts"])
        )
        for step, lo, hi in steps:
            inside = [e for e in gathers if lo <= _ns(e["ts"]) < hi]
            for k, e in enumerate(inside):
                per_rank.setdefault((step, k), []).append(e)
    got = {
        (c.step, int(c.key.rsplit("/", 1)[1])): c
        for c in a.collectives
        if c.collective == "gloo:all_gather"
    }
    assert set(got) == set(per_rank) and len(got) > 4
    for key, evs in per_rank.items():
        assert len(evs) == 2, key
        nbytes = {ELEMENT_BYTES[e["args"]["Input type"][0]] * _size(e) * 2 for e in evs}
        assert len(nbytes) == 1
        (nbytes,) = nbytes
        transfer_ns = max(_ns(e["ts"] + e["dur"]) for e in evs) - max(_ns(e["ts"]) for e in evs)
        assert transfer_ns > 0
        want = nbytes * (2 - 1) / 2 / transfer_ns  # bytes/ns = GB/s
        c = got[key]
        assert c.bytes == nbytes
        assert c.busbw_gbps == pytest.approx(want, rel=0.002), key
        assert c.busbw_gbps > 0


@pytest.mark.parametrize("job", [*JOBS, pytest.param(TPSCOPE_CPU, id="cpu-gloo-tiny")])
def test_bus_bandwidth_is_a_number_where_known_and_never_a_zero(job):
    """Where bytes and a transfer are known, busbw is a positive number; else unknown (None, "-"
    in the tables), never 0.0; and the terminal never prints a positive one as 0.0."""
    from tpscope.report.terminal import collectives_table

    a = analysis(job)
    assert a.collectives
    for c in a.collectives:
        if c.bytes is not None and c.transfer_us > 0:
            assert c.busbw_gbps is not None and c.busbw_gbps > 0, c
        else:
            assert c.busbw_gbps is None, c
    lines = collectives_table(a, top=len(a.collectives)).splitlines()
    assert lines and not [ln for ln in lines if ln.rstrip().endswith(" 0.0")]
