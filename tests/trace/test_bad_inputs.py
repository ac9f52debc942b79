"""A corpus of broken inputs, built here: each gives one clear line and exit 2, or a result with
warnings; never a traceback, never a hang (docs/robustness.md lists the outcomes)."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kineto import Collective, RankTrace, write_run
from tpscope.cli import main
from tpscope.errors import UserError
from tpscope.trace import load_run

REAL = Path(__file__).resolve().parent.parent / "data" / "h200-nvlink-unfused"
NCCL = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def good_doc(rank: int = 0, world_size: int = 1) -> dict:
    r = RankTrace(rank, world_size=world_size)
    r.gpu_annotation("ProfilerStep#1", 0, 100)
    r.kernel("gemm", 0, 50)
    r.kernel(NCCL, 20, 50, stream=14)
    return r.document()


def write(folder: Path, name: str, data: bytes | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def analyze(target: Path, capsys) -> tuple[int, str, str]:
    code = main(["analyze", str(target), "--json"])
    out, err = capsys.readouterr()
    return code, out, err


def expect_refusal(target: Path, capsys, words: str) -> None:
    code, out, err = analyze(target, capsys)
    assert code == 2, out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert "Traceback" not in err


def expect_warning(target: Path, capsys, words: str) -> dict:
    code, out, err = analyze(target, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert any(words in w for w in doc["warnings"]), doc["warnings"]
    return doc


def test_truncated_json(tmp_path, capsys):
    text = json.dumps(good_doc())
    write(tmp_path / "run", "r.json", text[: len(text) // 2])
    expect_refusal(tmp_path / "run", capsys, "not valid JSON")


def test_truncated_gzip(tmp_path, capsys):
    data = gzip.compress(json.dumps(good_doc()).encode())
    write(tmp_path / "run", "r.json.gz", data[: len(data) // 2])
    expect_refusal(tmp_path / "run", capsys, "broken gzip data")


def test_non_utf8_bytes_are_replaced(tmp_path, capsys):
    text = (
        json.dumps(good_doc())
        .replace('"gemm"', '"gemm_\\u00e9"')
        .encode()
        .replace(b"\\u00e9", b"\xff\xfe")
    )
    write(tmp_path / "run", "r.json", text)
    expect_warning(tmp_path / "run", capsys, "invalid UTF-8")


def test_empty_trace_events(tmp_path, capsys):
    write(tmp_path / "run", "r.json", json.dumps({"traceEvents": []}))
    expect_refusal(tmp_path / "run", capsys, "no trace events")


def test_events_without_ts_or_dur_and_negative_durations(tmp_path, capsys):
    doc = good_doc()
    doc["traceEvents"] += [
        {"ph": "X", "cat": "kernel", "name": "no_ts", "dur": 3, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "no_dur", "ts": 3, "args": {"device": 0, "stream": 7}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "neg",
            "ts": 3,
            "dur": -5,
            "args": {"device": 0, "stream": 7},
        },
    ]
    write(tmp_path / "run", "r.json", json.dumps(doc))
    result = expect_warning(tmp_path / "run", capsys, "3 GPU activities without a usable ts/dur")
    assert result["steps"][0]["compute_us"] == 50


def test_nan_values(tmp_path, capsys):
    text = json.dumps(good_doc())
    text = text.replace('"dur": 50', '"dur": NaN', 1)
    write(tmp_path / "run", "r.json", text)
    expect_warning(tmp_path / "run", capsys, "NaN or Infinity")


def test_string_pids_and_tids(tmp_path, capsys):
    doc = good_doc()
    for e in doc["traceEvents"]:
        e["pid"], e["tid"] = str(e["pid"]), f"stream {e['tid']}"
        e.get("args", {}).pop("device", None)
        e.get("args", {}).pop("stream", None)
    write(tmp_path / "run", "r.json", json.dumps(doc))
    code, out, err = analyze(tmp_path / "run", capsys)
    assert code == 0 and json.loads(out)["steps"][0]["hidden_comm_us"] == 30


def test_two_files_with_one_rank(tmp_path, capsys):
    write(tmp_path / "run", "a.json", json.dumps(good_doc(0)))
    write(tmp_path / "run", "b.json", json.dumps(good_doc(0)))
    expect_refusal(tmp_path / "run", capsys, "both claim rank 0")


def test_ranks_with_different_steps(tmp_path, capsys):
    a, b = good_doc(0, 2), good_doc(1, 2)
    for e in b["traceEvents"]:
        if e["name"] == "ProfilerStep#1":
            e["name"] = "ProfilerStep#2"
    write(tmp_path / "run", "a.json", json.dumps(a))
    write(tmp_path / "run", "b.json", json.dumps(b))
    expect_warning(tmp_path / "run", capsys, "ranks have different steps")


def test_missing_rank(tmp_path, capsys):
    write(tmp_path / "run", "a.json", json.dumps(good_doc(0, 4)))
    write(tmp_path / "run", "b.json", json.dumps(good_doc(2, 4)))
    expect_warning(tmp_path / "run", capsys, "no trace for 2 rank(s): 1, 3")


def test_rank_from_another_run(tmp_path, capsys):
    write(tmp_path / "run", "a.json", json.dumps(good_doc(0, 2)))
    write(tmp_path / "run", "b.json", json.dumps(good_doc(1, 8)))
    expect_refusal(
        tmp_path / "run",
        capsys,
        "rank files of different runs: a.json has world size 2, b.json world size 8",
    )


def test_collectives_that_do_not_match(tmp_path, capsys):
    ranks = []
    for rank, nelems in ((0, 1024), (1, 4096)):
        r = RankTrace(rank)
        r.gpu_annotation("ProfilerStep#1", 0, 100)
        r.kernel(
            NCCL, 10, 20, stream=14, collective=Collective("_allgather_base", nelems, 2 * nelems)
        )
        ranks.append(r)
    write_run(tmp_path / "run", ranks)
    code, out, err = analyze(tmp_path / "run", capsys)
    assert code == 0, err
    assert json.loads(out)["steps"], "the rest is still analyzed"


def test_zero_byte_file(tmp_path, capsys):
    write(tmp_path / "run", "r.json.gz", b"")
    expect_refusal(tmp_path / "run", capsys, "empty file")


def test_folder_of_unrelated_files(tmp_path, capsys):
    write(tmp_path / "run", "notes.txt", "hello")
    write(tmp_path / "run", "image.png", b"\x89PNG")
    expect_refusal(tmp_path / "run", capsys, "no trace files")


def test_unrelated_json_files(tmp_path, capsys):
    write(tmp_path / "run", "config.json", json.dumps({"lr": 0.1}))
    write(tmp_path / "run", "list.json", json.dumps([1, 2, 3]))
    expect_refusal(tmp_path / "run", capsys, "no readable trace")


def test_symlink_loop(tmp_path, capsys):
    run = tmp_path / "run"
    write(run, "r.json", json.dumps(good_doc()))
    os.symlink(run / "loop.json", run / "loop.json")  # points at itself
    os.symlink(tmp_path / "run", run / "self")  # a folder that contains itself
    code, out, err = analyze(run, capsys)
    assert code == 0, err
    os.symlink(tmp_path / "loop2", tmp_path / "loop2")
    expect_refusal(tmp_path / "loop2", capsys, "loop2")


def test_huge_integers_in_args(tmp_path, capsys):
    doc = good_doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"]["correlation"] = 2**80
            e["args"]["grid"] = [2**70, 1, 1]
    write(tmp_path / "run", "r.json", json.dumps(doc))
    code, out, err = analyze(tmp_path / "run", capsys)
    assert code == 0, err
    assert json.loads(out)["steps"][0]["hidden_comm_us"] == 30


def test_tolerant_path_reads_a_real_trace_like_the_fast_path(tmp_path):
    fast = load_run(REAL)
    run = tmp_path / "run"
    for rank in fast.ranks:
        doc = json.load(gzip.open(rank.path))
        doc["traceEvents"].append(
            {"ph": "X", "cat": "cpu_op", "name": "odd", "ts": "soon", "dur": 1}
        )
        write(run, rank.path.name, gzip.compress(json.dumps(doc).encode()))
    slow = load_run(run)
    assert any("tolerant decoder" in w or "dropped" in w for w in slow.warnings)
    for a, b in zip(fast.ranks, slow.ranks, strict=True):
        assert a.rank == b.rank
        for field in ("start_ns", "end_ns", "cls", "lane", "launch_end_ns", "in_nelems"):
            assert (getattr(a.gpu, field) == getattr(b.gpu, field)).all(), field
        assert (a.steps.start_ns == b.steps.start_ns).all()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
event_keys = st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"])
events = st.dictionaries(
    event_keys,
    json_values | st.sampled_from(["X", "kernel", "gpu_memcpy", "cuda_runtime"]),
    max_size=8,
)


@settings(
    max_examples=int(os.environ.get("TPSCOPE_FUZZ_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(events, max_size=12),
    st.sampled_from(["dict", "list", "bytes"]),
    st.binary(max_size=64),
)
def test_fuzz_loader_never_crashes(tmp_path, evs, shape, junk):
    path = tmp_path / "fuzz.json"
    if shape == "dict":
        path.write_text(json.dumps({"traceEvents": evs, "distributedInfo": {"rank": 0}}))
    elif shape == "list":
        path.write_text(json.dumps(evs))
    else:
        path.write_bytes(junk)
    try:
        run = load_run(path)
    except UserError as exc:
        assert "\n" not in str(exc)
    else:
        from tpscope.metrics import analyze_run, as_json

        json.dumps(as_json(analyze_run(run)))


def test_base_time_past_int64_is_refused_in_one_line(tmp_path, capsys):
    doc = good_doc()
    doc["baseTimeNanoseconds"] = 2**64
    write(tmp_path / "run", "r.json", json.dumps(doc))
    expect_refusal(tmp_path / "run", capsys, "baseTimeNanoseconds")


def test_a_twenty_digit_step_number_is_no_step(tmp_path, capsys):
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#12345678901234567890", 0, 100)
    r.kernel("gemm", 0, 50)
    r.kernel(NCCL, 20, 50, stream=14)
    write(tmp_path / "run", "r.json", json.dumps(r.document()))
    code, out, err = analyze(tmp_path / "run", capsys)
    assert code == 0, err
    steps = json.loads(out)["steps"]
    # not a step number int64 holds: the one window over all GPU activity (step 0), 20 µs hidden
    assert [s["step"] for s in steps] == [0] and steps[0]["hidden_comm_us"] == 30


def _analyze_in_a_process(run: Path, workers: str) -> subprocess.CompletedProcess:
    """`tpscope analyze RUN` in a process of its own: the outcome must not depend on the recursion
    limit a test runner sets."""
    return subprocess.run(
        [sys.executable, "-m", "tpscope.cli", "analyze", str(run), "--no-cache"]
        + ["--workers", workers],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_field_nested_deeply_is_refused_in_one_line(tmp_path, depth, workers):
    text = json.dumps(good_doc())
    write(tmp_path / "run", "r.json", text[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}")
    done = _analyze_in_a_process(tmp_path / "run", workers)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.count("\n") == 1
        and "nested too deeply" in done.stderr
        and "r.json" in done.stderr
    )


# The decoder fuzzed from a real-shaped trace: random truncations, a field's value swapped for
# another type, huge numbers, deep nesting; the loader and the analysis must give a result or
# one UserError line, never anything else (docs/robustness.md).
def _seed_doc() -> dict:
    from tests.kineto import late_all_gather_ranks

    return late_all_gather_ranks()[0].document()


SEED = _seed_doc()
SWAP_VALUES = (
    st.none()
    | st.booleans()
    | st.text(max_size=6)
    | st.just([])
    | st.just({})
    | st.just([1, "x"])
    | st.integers(-(2**200), 2**200)
    | st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**40])
    | st.floats(allow_nan=False)
    | st.sampled_from([1e308, -1e308, 5e-324, 9e15, -9e15])
)
FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
ARG_FIELDS = (
    "device",
    "stream",
    "correlation",
    "External id",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Group size",
    "Seq",
    "grid",
    "block",
    "Input Dims",
)
HEADER_FIELDS = (
    "baseTimeNanoseconds",
    "distributedInfo",
    "traceEvents",
    "deviceProperties",
    "hostname",
)


@st.composite
def mutated_traces(draw) -> bytes:
    doc = json.loads(json.dumps(SEED))
    events = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["event", "arg", "header", "nest"]))
        value = draw(SWAP_VALUES)
        if kind == "header":
            doc[draw(st.sampled_from(HEADER_FIELDS))] = value
            events = doc["traceEvents"] if isinstance(doc.get("traceEvents"), list) else []
        elif events:
            event = events[draw(st.integers(0, len(events) - 1))]
            if not isinstance(event, dict):
                continue
            if kind == "event":
                event[draw(st.sampled_from(FIELDS))] = value
            elif kind == "arg" and isinstance(event.get("args"), dict):
                event["args"][draw(st.sampled_from(ARG_FIELDS))] = value
            elif kind == "nest":  # a placeholder, replaced by the nested text below
                event[draw(st.sampled_from(FIELDS))] = (
                    f"@nest{draw(st.sampled_from([10, 200, 3000]))}@"
                )
    text = json.dumps(doc)
    for depth in (10, 200, 3000):
        text = text.replace(f'"@nest{depth}@"', "[" * depth + "]" * depth)
    data = text.encode()
    if draw(st.booleans()):  # truncated somewhere
        data = data[: draw(st.integers(0, len(data)))]
    return data


@settings(
    max_examples=int(os.environ.get("TPSCOPE_FUZZ_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutated_traces(), st.booleans())
def test_fuzz_decoder_mutations_give_a_result_or_one_line(tmp_path, data, gz):
    path = tmp_path / ("fuzz.json.gz" if gz else "fuzz.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        run = load_run(path)
    except UserError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        from tpscope.metrics import analyze_run, as_json

        json.dumps(as_json(analyze_run(run)))


def _analysis(target: Path, capsys, *extra: str) -> dict:
    code = main(["analyze", str(target), "--json", "--no-cache", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_a_number_as_a_thread_name_loses_no_other_argument(tmp_path, capsys):
    # one metadata event of an odd type sends the file to the tolerant decoder; every other
    # event must read as the typed decoder reads it (GEMMs need their ops' Input type)
    for variant in ("plain", "odd"):
        for path in sorted(REAL.glob("*.json.gz")):
            doc = json.load(gzip.open(path))
            if variant == "odd":
                doc["traceEvents"].append(
                    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": 5}}
                )
            write(tmp_path / variant, path.name, gzip.compress(json.dumps(doc).encode()))
    plain = _analysis(tmp_path / "plain", capsys)
    odd = _analysis(tmp_path / "odd", capsys)
    assert plain["gemm_budget"]["rank_steps"] > 0 and plain["gemm_budget"]["gemm_us"] > 0
    assert any("tolerant decoder" in w for w in odd["warnings"])
    for key in plain.keys() - {"run_dir", "warnings"}:
        assert odd[key] == plain[key], key


@pytest.mark.parametrize("reader", ["c", "msgspec"])
def test_a_lone_surrogate_escape_is_replaced_with_a_warning(tmp_path, capsys, monkeypatch, reader):
    if reader == "msgspec":
        from tpscope.trace.read import stream

        monkeypatch.setattr(stream, "extract_text", lambda *a, **k: None)
    doc = good_doc()
    text = json.dumps(doc)
    assert text.count('"gemm"') == 1
    # a lone high surrogate, a lone low one, a valid pair, and an escaped backslash before "ud800"
    text = text.replace('"gemm"', '"ge\\ud800mm\\udc00 \\ud83d\\ude00 \\\\ud800"')
    write(tmp_path / "run", "r.json", text)
    found = expect_warning(tmp_path / "run", capsys, "surrogate")
    kernels = load_run(tmp_path / "run").ranks[0]
    names = {kernels.symbols[i] for i in kernels.gpu.name_id.tolist()}
    assert "ge\ufffdmm\ufffd \U0001f600 \\ud800" in names, names
    assert found["steps"][0]["hidden_comm_us"] == 30


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("depth", [300, 1_200])
def test_an_argument_nested_deeply_is_refused_in_one_line(tmp_path, depth, workers):
    # Input Dims are kept as their JSON text and parsed later (GEMM shapes): refused on reading,
    # whichever reader read them
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 100)
    deep: list = []
    for _ in range(depth):
        deep = [deep]
    r.kernel("gemm", 0, 50, input_dims=[[64, 64], deep], cpu_op="aten::mm")
    write(tmp_path / "run", "r.json", json.dumps(r.document()))
    done = _analyze_in_a_process(tmp_path / "run", workers)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "nested too deeply" in done.stderr, done.stderr
