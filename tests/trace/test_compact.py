"""The map result (trace/compact.py): the CPU ops it drops are ones nothing reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.kineto import RankTrace as KinetoRank
from tests.kineto import write_run
from tpscope.trace import run_folder
from tpscope.trace.assemble import assemble
from tpscope.trace.compact import compact_rank

ROOT = Path(__file__).resolve().parents[2]
REAL = sorted(
    p
    for d in (
        "sample_traces/h200x2-shm-chunked",
        "sample_traces/h200x1-nested-loop",
        "tests/data/real/tracelens-qwen05b-h100",
        "tests/data/real/param-dlrm-torchrec-v100x8",
        "tests/data/h200-shm-chunked4",
    )
    for p in run_folder.find_trace_files(ROOT / d)
)


def full_rank(path: Path, threads: int = 1):
    """The rank's tables before the map cuts them (every CPU op)."""
    trace, raw, warnings = run_folder._read_raw(path, 1)
    return assemble(path, trace, raw, 0, tuple(warnings), threads)


def op_names_by_id(r, queries: np.ndarray) -> list:
    """Brute force: per External id, the name of the last CPU op (in table order) carrying it."""
    last = {}
    for ext, name in zip(r.cpu_ops.external_id.tolist(), r.cpu_ops.name_id.tolist()):
        if ext >= 0:
            last[ext] = r.symbols[name]
    return [last.get(q) for q in queries.tolist()]


def outermost(r) -> set:
    """Brute force, the dashboard's rule: per thread, in order of start (the longer first, CPU ops
    before runtime calls on a tie), the calls that end after every earlier one."""
    rows = []
    for kind, c in enumerate((r.cpu_ops, r.runtime)):
        for k in range(len(c)):
            s, e = int(c.start_ns[k]), int(c.end_ns[k])
            rows.append((int(c.tid[k]), s, -max(e, s), kind, k, r.symbols[c.name_id[k]]))
    rows.sort()
    out, reach = set(), {}
    for tid, s, neg_end, kind, _, name in rows:
        if tid not in reach or -neg_end > reach[tid]:
            out.add((tid, s, -neg_end, kind, name))
        reach[tid] = max(reach.get(tid, -(2**63)), -neg_end)
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_what_the_analysis_and_dashboard_read_is_kept(path, threads):
    """Against brute force, the tables assembled and cut in one thread or two (`beside.py`)."""
    full = full_rank(path, threads)
    small = compact_rank(full, threads)
    for calls in (full.cpu_ops, full.runtime):  # in order of start
        assert (np.diff(calls.start_ns) >= 0).all()
    assert len(small.cpu_ops) < len(full.cpu_ops)  # these traces all have CPU ops nothing reads
    for queries in (full.gpu.external_id, full.runtime.external_id):
        assert op_names_by_id(small, queries) == op_names_by_id(full, queries)
    c10d = [
        (s, n)
        for s, n in zip(full.cpu_ops.start_ns.tolist(), full.cpu_ops.name_id.tolist())
        if full.symbols[n].startswith("c10d::")
    ]
    assert [
        (s, n)
        for s, n in zip(small.cpu_ops.start_ns.tolist(), small.cpu_ops.name_id.tolist())
        if small.symbols[n].startswith("c10d::")
    ] == c10d
    assert outermost(small) == outermost(full)
    for table in ("gpu", "annotations", "waits", "steps", "runtime"):
        assert getattr(small, table) is getattr(full, table)


def test_a_nested_op_that_launches_nothing_is_dropped_and_its_parent_kept(tmp_path):
    r = KinetoRank(0, world_size=1)
    r.kernel("gemm", 20, 10, launch_us=(10.0, 2.0))  # its aten::mm op and launch call at 10 µs
    r.raw(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::linear",
            "pid": 100,
            "tid": 100,
            "ts": 0.0,
            "dur": 50.0,
            "args": {"External id": 900},
        }
    )
    r.raw(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::empty",
            "pid": 100,
            "tid": 100,
            "ts": 1.0,
            "dur": 1.0,
            "args": {"External id": 901},
        }
    )
    # outermost: kept
    r.raw(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::view",
            "pid": 100,
            "tid": 100,
            "ts": 60.0,
            "dur": 1.0,
            "args": {"External id": 902},
        }
    )
    write_run(tmp_path / "run", [r])
    path = run_folder.find_trace_files(tmp_path / "run")[0]
    full = full_rank(path)
    loaded = run_folder.load_rank_file(path)
    names = lambda x: sorted(x.symbols[k] for k in x.cpu_ops.name_id.tolist())  # noqa: E731
    assert names(full) == ["aten::empty", "aten::linear", "aten::mm", "aten::view"]
    assert names(loaded) == ["aten::linear", "aten::mm", "aten::view"]


def test_a_packed_map_result_unpacks_to_the_same_tables():
    import dataclasses
    import pickle

    from tpscope.trace.compact import pack

    path = REAL[0]
    r = run_folder.load_rank_file(path)
    packed = pack(r)
    back = packed.unpack()
    assert len(pickle.dumps(packed)) < len(pickle.dumps(r)) / 3
    for f in dataclasses.fields(r):
        a, b = getattr(r, f.name), getattr(back, f.name)
        if dataclasses.is_dataclass(a):
            for g in dataclasses.fields(a):
                np.testing.assert_array_equal(getattr(a, g.name), getattr(b, g.name))
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b
