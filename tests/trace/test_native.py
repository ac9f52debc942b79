"""The C reader (`native.extract_text`) against msgspec's typed decoding plus `extract.extract`:
the same raw columns, or a refusal (None) wherever msgspec could read the text differently."""

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpscope.trace.read import native
from tpscope.trace.read.decode import EVENTS_DECODER
from tpscope.trace.read.extract import SYMBOL_COLUMNS, extract

ROOT = Path(__file__).resolve().parent.parent.parent
FUZZ_EXAMPLES = int(os.environ.get("TPSCOPE_FUZZ_EXAMPLES", 300))
# another build of the C reader to test (the sanitized one of test_the_fuzz_tests_pass_sanitized)
SANITIZED_BUILD = os.environ.get("TPSCOPE_TEST_NATIVE_BUILD")
if SANITIZED_BUILD:
    _spec = importlib.util.spec_from_file_location("tpscope.trace._event_columns", SANITIZED_BUILD)
    native._event_columns = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(native._event_columns)
TRACES = [  # every Kineto trace of the test data (not the execution trace) and of the samples
    p
    for p in sorted((ROOT / "tests" / "data").glob("**/*.json.gz"))
    + sorted((ROOT / "sample_traces").glob("*/rank0*.json.gz"))
    if not p.name.endswith("_et.json.gz")
]


def by_text(raw):
    """Every column, symbol ids replaced by their text (None for -1): the two readers number
    symbols differently."""
    symbols = np.array([*raw.symbols, None], dtype=object)
    out = {}
    for group, cols in raw.groups.items():
        for name, col in cols.items():
            text = (
                symbols[np.where(col < 0, len(raw.symbols), col)]
                if name in SYMBOL_COLUMNS
                else None
            )
            out[group, name] = (col.dtype, col if text is None else text)
    return out


def assert_same(ref, got):
    x, y = by_text(ref), by_text(got)
    assert x.keys() == y.keys()
    for key in x:
        assert x[key][0] == y[key][0], key  # the dtype
        np.testing.assert_array_equal(x[key][1], y[key][1], err_msg=str(key))
    assert ref.dropped == got.dropped
    assert ref.hostnames == got.hostnames


def both(text: bytes, chunk_bytes: int = native.NATIVE_CHUNK_BYTES):
    """(msgspec's columns or None where it refuses the types, the C reader's or None) of the JSON
    array `text`."""
    try:
        ref = extract(EVENTS_DECODER.decode(text), 0)
    except msgspec.ValidationError:
        ref = None
    return ref, native.extract_text(text, 1, len(text) - 1, chunk_bytes)


def test_the_extension_is_built():
    # the package builds it where there is a C compiler (CI has one); without it every trace is
    # read by msgspec, correctly but several times slower
    assert native.available()


@pytest.mark.parametrize("path", TRACES, ids=lambda p: f"{p.parent.name}/{p.name[:30]}")
def test_real_traces_read_the_same(path):
    events = msgspec.json.encode(msgspec.json.decode(gzip.open(path).read())["traceEvents"])
    for text in (events, msgspec.json.format(events, indent=1)):  # compact, and Kineto-like
        ref, got = both(text)
        if ref is None:  # field types msgspec's typed decoding refuses (the tolerant reader's)
            assert got is None
            continue
        assert got is not None
        assert_same(ref, got)


def test_small_chunks_give_the_same_columns():
    doc = json.load(gzip.open(TRACES[0]))
    text = json.dumps(doc["traceEvents"], indent=1).encode()
    ref, whole = both(text)
    _, pieces = both(text, chunk_bytes=300)  # cut after nearly every event
    assert_same(ref, whole)
    assert_same(ref, pieces)


def test_a_nested_event_boundary_is_not_a_cut():
    # "}, {" inside an event's arguments: a chunk cut there is not valid JSON, and the reader
    # takes the chunk on to the next boundary instead of giving up
    nested = {"ph": "X", "cat": "cpu_op", "name": "op", "ts": 1, "dur": 1,
              "args": {"list": [{"a": 1}, {"b": 2}] * 50, "External id": 7}}  # fmt: skip
    events = [nested if k % 3 == 0 else {**nested, "args": {"External id": k}} for k in range(60)]
    text = json.dumps(events).encode()
    ref, got = both(text, chunk_bytes=200)
    assert got is not None
    assert_same(ref, got)


def test_raw_arguments_keep_their_exact_text():
    text = (
        b'[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "args": '
        b'{"Input Dims" :  [[4,  8],[ ], [[1]]] , "Input type": ["float", "c10::Half\\"x"],'
        b' "Input Strides": null}}]'
    )
    got = native.extract_text(text, 1, len(text) - 1)
    ops = got.groups["cpu_op"]
    texts = [got.symbols[ops[k][0]] for k in ("dims_id", "types_id", "strides_id")]
    assert texts == ["[[4,  8],[ ], [[1]]]", '["float", "c10::Half\\"x"]', "null"]
    assert_same(both(text)[0], got)


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X", "ph": "X"}]',  # a duplicated key
        b'[{"ph": "X", "args": {"correlation": 1, "correlation": 2}}]',
        b'[{"ph": "X", "args": {"Input\\u0020Dims": [1]}}]',  # a raw argument's key with escapes
        b'[{"ph": "X", "args": {"correlation": 18446744073709551615}}]',  # past int64
        b'[{"ph": "X", "ts": 1e999}]',  # past float64
        b'[{"ph": "X", "args": {"correlation": true}}]',
        b'[{"ph": "X", "args": {"correlation": 1.0}}]',
        b'[{"ph": "X", "args": {"grid": [1, 2]}}]',
        b'[{"ph": "X", "args": {"grid": [1, 2, 4611686018427387904]}}]',
        b'[{"ph": 1}]',
        b'[{"ph": "X", "args": [1]}]',
        b'[{"ph": "X", "name": "\\ud800"}]',  # a lone surrogate
        b'[{"ph": "X", "name": "\xff"}]',  # not UTF-8
        b'[{"ph": "X", "ts": NaN}]',
        b'[{"ph": "X"},, {"ph": "X"}]',
        b'[{"ph": "X"}, 3]',
        b'[{"ph": "X", "ts": 1',
    ],
)
def test_refuses_what_msgspec_could_read_differently(text):
    assert native.extract_text(text, 1, len(text) - 1) is None


# --- random events: every field a value of its type, of another type, null or absent ----------

ABSENT = object()
INTS = st.integers(-(2**63) + 1, 2**63 - 1) | st.integers(-5, 5)
TEXTS = st.text(max_size=12) | st.sampled_from(["", "0", "12", " 7", "-3", "hostname", "[0, 1]"])
ODD = st.sampled_from([True, 1.5, [1], {"a": 1}, 2**64, "x"])
CATEGORIES = ["kernel", "Kernel", "gpu_memcpy", "Memset", "cuda_runtime", "Runtime", "cpu_op",
              "user_annotation", "gpu_user_annotation", "cuda_sync", "cuda_driver", "python_function"]  # fmt: skip


def field(values, odd=ODD, odd_share=True):
    options = [values, st.none(), st.just(ABSENT)]
    if odd_share:
        options.append(odd)
    return st.one_of(*options)


def args_strategy(odd: bool):
    ints = {k: field(INTS, odd_share=odd) for k in (
        "correlation", "External id", "In msg nelems", "Out msg nelems", "Group size", "Seq",
        "Src Rank", "Dst Rank", "wait_on_stream", "wait_on_cuda_event_record_corr_id")}  # fmt: skip
    strings = {k: field(TEXTS, odd_share=odd) for k in (
        "Collective name", "dtype", "Process Group Name", "Process Group Description", "name")}  # fmt: skip
    dims = st.lists(st.integers(-(2**61), 2**61), min_size=3, max_size=3)
    raw = st.recursive(INTS | TEXTS | st.none(), lambda c: st.lists(c, max_size=3), max_leaves=6)
    return st.fixed_dictionaries(
        {},
        optional={
            **ints,
            **strings,
            "device": field(INTS | TEXTS, odd_share=odd),
            "stream": field(INTS | TEXTS, odd_share=odd),
            "grid": field(dims, odd_share=odd),
            "block": field(dims, odd_share=odd),
            "Process Group Ranks": field(st.lists(INTS, max_size=4) | TEXTS, odd_share=odd),
            "Input Dims": raw,
            "Input type": raw,
            "Input Strides": raw,
            "other": raw,
        },
    )


def event_strategy(odd: bool):
    return st.fixed_dictionaries(
        {
            "ph": field(st.sampled_from(["X", "M", "i", "x"]), odd_share=odd),
            "cat": field(st.sampled_from(CATEGORIES), odd_share=odd),
            "name": field(TEXTS | st.sampled_from(["hostname", "host_name"]), odd_share=odd),
            "pid": field(INTS | TEXTS, odd_share=odd),
            "tid": field(INTS | TEXTS, odd_share=odd),
            "ts": field(st.floats(allow_nan=False, allow_infinity=False) | INTS, odd_share=odd),
            "dur": field(st.floats(-10, 1e7, allow_nan=False) | INTS, odd_share=odd),
            "args": st.one_of(args_strategy(odd), st.none(), st.just(ABSENT)),
        }
    )


def to_text(events, indent) -> bytes:
    def present(d):
        return {
            k: present(v) if isinstance(v, dict) else v for k, v in d.items() if v is not ABSENT
        }

    return json.dumps([present(e) for e in events], indent=indent).encode()


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(event_strategy(odd=False), max_size=12),
    indent=st.sampled_from([None, 1]),
    chunk=st.sampled_from([64, 1 << 20]),
)
def test_random_well_typed_events_read_the_same(events, indent, chunk):
    text = to_text(events, indent)
    ref, got = both(text, chunk)
    assert ref is not None
    # every text of this strategy is the C reader's to read
    assert got is not None
    assert_same(ref, got)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(event_strategy(odd=True), max_size=8), indent=st.sampled_from([None, 1]))
def test_random_events_of_any_type_read_the_same_or_are_refused(events, indent):
    text = to_text(events, indent)
    ref, got = both(text)
    if ref is None:  # msgspec's typed decoding refuses them (the tolerant reader takes over)
        assert got is None
    elif got is not None:
        assert_same(ref, got)


def test_the_analysis_is_the_same_with_either_reader(monkeypatch, capsys):
    # symbols are numbered differently by the two readers; no output may depend on that (this
    # run's contention tables once came out in another order)
    from tpscope.cli import main
    from tpscope.trace.read import stream

    run = str(ROOT / "sample_traces" / "h200x2-nvlink-copy_engine")
    outputs = []
    for reader in (stream.extract_text, lambda *a, **k: None):
        monkeypatch.setattr(stream, "extract_text", reader)
        assert main(["analyze", run, "--json", "--no-cache", "--workers", "1"]) == 0
        outputs.append(capsys.readouterr().out)
    assert json.loads(outputs[0])["comm_contention"]  # the tables are there to compare
    assert outputs[0] == outputs[1]


def test_lane_strings_read_the_same_by_both_readers():
    # a sign and up to 18 ASCII digits are a number; anything else names a lane
    tids = ["+5", "-3", " 7", "1_000", "123456789012345678", "1234567890123456789", "٣", "x"]
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": t, "ts": k, "dur": 1}
        for k, t in enumerate(tids)
    ]
    ref, got = both(json.dumps(events).encode())
    assert ref is not None and got is not None
    assert_same(ref, got)
    numbers = ref.groups["cpu_op"]["tid"].tolist()
    assert numbers[:3] == [5, -3, 7] and numbers[4] == 123456789012345678
    named = numbers[3:4] + numbers[5:]
    assert all(n >= 1 << 40 and n not in (1000, 1234567890123456789, 3) for n in named)
    assert len(set(named)) == len(named)


def _sanitizer_runtime(name: str) -> str:
    """The path of gcc's `name` (libasan.so): .ci/test installs it where it is missing."""
    found = subprocess.run(
        ["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert os.path.isabs(found), f"{name} is not installed (apt-get install libgcc-N-dev)"
    return found


# the C reader built with AddressSanitizer and UndefinedBehaviorSanitizer, and this file's tests
# of it (the random ones among them) run against that build, in a process of its own
SANITIZED_TESTS = "random or refuses or lane or raw_arguments or nested or small_chunks or layouts"


@pytest.mark.skipif(bool(SANITIZED_BUILD), reason="this is the sanitized run itself")
def test_the_fuzz_tests_pass_sanitized(tmp_path):
    assert shutil.which("gcc"), "the C reader's tests need gcc (CI has it)"
    asan = _sanitizer_runtime("libasan.so")
    _sanitizer_runtime("libubsan.so")
    build = tmp_path / ("_event_columns" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
         f"-I{ROOT / 'third_party' / 'yyjson'}", f"-I{sysconfig.get_paths()['include']}",
         str(ROOT / "tpscope" / "trace" / "_event_columns.c"),
         str(ROOT / "third_party" / "yyjson" / "yyjson.c"), "-o", str(build)],
        check=True,
        timeout=300,
    )  # fmt: skip
    env = {
        **os.environ,
        "TPSCOPE_TEST_NATIVE_BUILD": str(build),
        "TPSCOPE_FUZZ_EXAMPLES": "100",  # a sanitized run is several times slower
        "LD_PRELOAD": asan,  # ASan's runtime must come first
        "ASAN_OPTIONS": "detect_leaks=0",  # Python itself keeps memory to the end
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", SANITIZED_TESTS],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    report = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert "runtime error" not in report and "AddressSanitizer" not in report, report
    assert " passed" in done.stdout and "deselected" in done.stdout, report


def _kernel(k: int, **args) -> str:
    return json.dumps(
        {"ph": "X", "cat": "kernel", "name": f"k{k % 5}", "pid": 0, "tid": 7, "ts": 10.0 * k,
         "dur": 5.0, "args": {"device": 0, "stream": 7, "correlation": k, **args}}
    )  # fmt: skip


def test_layouts_the_chunks_cannot_cut_read_the_same():
    """An event many chunks long (a long string, a list of objects whose "}, {" are no cuts, a
    parse tree many times its text: read by msgspec), a long run of blanks between events, and
    events far shorter than Kineto's (read in several calls): the C reader's columns are
    msgspec's."""
    chunk = 1 << 12
    many = [{"a": [{"b": 1}, {"b": 2}]} for _ in range(2000)]  # 9 values per 27 bytes
    texts = {
        "long string": [_kernel(0), _kernel(1, blob="x" * 50 * chunk), _kernel(2)],
        "nested list": [_kernel(0), _kernel(1, l=many, deep={"n": {"n": {"n": 1}}}), _kernel(2)],
        "blank run": [_kernel(0), " " * 20 * chunk + _kernel(1), _kernel(2) + "\n" * 9 * chunk],
        "tiny events": [json.dumps({"ph": "X", "cat": "kernel", "ts": k, "dur": 1})
                        for k in range(20_000)],
    }  # fmt: skip
    for layout, events in texts.items():
        for sep in (",", ", ", ",\n  "):
            text = ("[" + sep.join(e.strip() if sep == "," else e for e in events) + "]").encode()
            ref, got = both(text, chunk)
            assert ref is not None and got is not None, layout
            assert_same(ref, got)
    assert len(got.groups["gpu"]["start_ns"]) == 20_000
