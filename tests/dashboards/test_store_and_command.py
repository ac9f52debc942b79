"""The run store (only the given folders, disk cache per modification time) and `tpscope dash`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import requests

from tests.dashboards.conftest import CHUNKED, UNFUSED, free_port
from tpscope.cache import DiskCache
from tpscope.cli import build_parser, main
from tpscope.dashboards.store import RunStore, UnknownRun
from tpscope.errors import UserError
from tpscope.metrics import analyze_run, as_json
from tpscope.trace import load_run

REPO = Path(__file__).resolve().parent.parent.parent


def test_store_serves_only_the_given_folders(tmp_path):
    store = RunStore([CHUNKED, UNFUSED, tmp_path / "x" / CHUNKED.name], cache=None)
    assert store.run_ids == [CHUNKED.name, UNFUSED.name, f"{CHUNKED.name}-2"]
    for forged in (
        str(CHUNKED),
        "../" + CHUNKED.name,
        "/etc/passwd",
        None,
        3,
        "",
        CHUNKED.name + "/",
    ):
        with pytest.raises(UnknownRun):
            store.entry(forged)
    assert store.load(CHUNKED.name).doc == as_json(analyze_run(load_run(CHUNKED)))
    with pytest.raises(UserError, match="no such file"):
        store.load(f"{CHUNKED.name}-2")


def test_disk_cache_reads_a_folder_again_fast_and_notices_changes(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(CHUNKED, run)
    cache_dir = tmp_path / "cache"
    first = RunStore([run], DiskCache(cache_dir))
    doc = first.load("run").doc
    assert first.cache.misses == 1 and first.cache.hits == 0
    again = RunStore([run], DiskCache(cache_dir))  # a new process, same folder
    t0 = time.perf_counter()
    assert again.load("run").doc == doc
    assert time.perf_counter() - t0 < 1.0
    assert again.cache.hits == 1 and again.cache.misses == 0
    trace = next(run.glob("rank1.*"))
    stat = trace.stat()
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file changed
    changed = RunStore([run], DiskCache(cache_dir))
    assert changed.load("run").doc == doc
    assert changed.cache.misses == 1
    # a running app notices too: the same store reads the rewritten folder again
    before = changed.load("run")
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2 * 10**9))
    assert changed.load("run") is not before and changed.cache.misses == 2
    assert changed.load("run") is changed.load("run")
    for f in cache_dir.glob("*.pkl"):
        f.write_bytes(b"not a pickle")  # a damaged cache is recomputed, never an error
    damaged = RunStore([run], DiskCache(cache_dir))
    assert damaged.load("run").doc == doc and damaged.cache.misses == 1


def test_dash_binds_loopback_by_default_and_refuses_missing_folders(capsys, tmp_path):
    args = build_parser().parse_args(["dash"])
    assert args.host == "127.0.0.1" and args.run_dirs == []
    assert main(["dash", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no such file or folder" in err


def test_without_folders_the_app_opens_on_the_default_sample_run(tmp_path, monkeypatch):
    from tpscope.dashboards.dash_command import build_app

    samples = tmp_path / "sample_traces"
    for run in (CHUNKED, UNFUSED):
        shutil.copytree(run, samples / run.name)
    (samples / "DEFAULT").write_text(CHUNKED.name + "\n")  # not the first by name
    monkeypatch.setenv("TPSCOPE_SAMPLE_TRACES", str(samples))
    app, runs = build_app([], use_cache=False)
    assert sorted(p.name for p in runs) == sorted([CHUNKED.name, UNFUSED.name])
    picker = _find(app.layout, "run-select")
    assert picker.value == CHUNKED.name
    store = app.server.config["TPSCOPE_STORE"]  # read ahead of the page, the one shown first
    store._reader.join(timeout=120)
    assert store.ready(CHUNKED.name) is not None and store.ready(UNFUSED.name) is not None
    app, _ = build_app([str(UNFUSED), str(CHUNKED)], use_cache=False)
    assert _find(app.layout, "run-select").value == UNFUSED.name  # given folders: the first given


def _find(component, component_id):
    if getattr(component, "id", None) == component_id:
        return component
    children = getattr(component, "children", None)
    for child in (
        children if isinstance(children, list) else [children] if children is not None else []
    ):
        found = _find(child, component_id)
        if found is not None:
            return found
    return None


@contextmanager
def _dash_server(tmp_path: Path, runs: tuple[Path, ...]):
    """`tpscope dash` in a process of its own, serving copies of `runs` as its sample runs on a
    free port: (the process, its port); stopped on leaving."""
    samples = tmp_path / "sample_traces"
    for run in runs:
        shutil.copytree(run, samples / run.name)
    port = free_port()
    env = {
        **os.environ,
        "TPSCOPE_SAMPLE_TRACES": str(samples),
        "TPSCOPE_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpscope.cli", "dash", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_tpscope_dash_serves_the_sample_runs_on_127_0_0_1(tmp_path):
    with _dash_server(tmp_path, (CHUNKED, UNFUSED)) as (proc, port):
        layout = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                layout = requests.get(f"http://127.0.0.1:{port}/_dash-layout", timeout=2).text
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        assert layout is not None, (
            proc.stdout.read().decode() if proc.poll() is not None else "no answer"
        )
        assert CHUNKED.name in layout and UNFUSED.name in layout
        listening = [
            c.laddr
            for c in psutil.Process(proc.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening and all(a.ip == "127.0.0.1" and a.port == port for a in listening), (
            listening
        )
        proc.terminate()
        out = proc.communicate(timeout=20)[0].decode()
        # our one line says where the page is; no "development server" warning, no Flask banner
        assert f"serving 2 run folder(s) on http://127.0.0.1:{port}/" in out, out
        assert "development server" not in out and "Serving Flask app" not in out, out
        assert "Dash is running" not in out, out  # the same address twice, in Dash's words


def test_screenshot_script_makes_a_png(tmp_path):
    from tpscope.dashboards.screenshot import take

    out = take(
        [UNFUSED, CHUNKED],
        tmp_path / "shot.png",
        run=CHUNKED.name,
        tab="breakdown",
        width=1000,
        height=700,
    )
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1000, 700) or width >= 900, (width, height)
    assert len(data) > 20_000  # a drawn page, not a blank one


def _manifest_only(folder: Path, **fields) -> Path:
    folder.mkdir(parents=True)
    base = {
        "regime": "shm",
        "tp": 2,
        "model": {"layers": 2, "hidden": 64},
        "dtype": "bfloat16",
        "seq_len": 16,
        "batch": 2,
        "mode": "none",
    }
    (folder / "tpscope_run.jsonc").write_text(json.dumps({**base, **fields}))
    return folder


def test_a_fused_run_suggests_the_unfused_run_of_its_experiment(tmp_path):
    """Read from manifests alone: same regime, tp, model, dtype, sequence length and batch."""
    other_model = _manifest_only(tmp_path / "none-wider", model={"layers": 2, "hidden": 128})
    other_regime = _manifest_only(tmp_path / "none-nvlink", regime="nvlink")
    unfused = _manifest_only(tmp_path / "none-shm")
    fused = _manifest_only(tmp_path / "chunked-shm", mode="chunked", chunks=4)
    lone = _manifest_only(
        tmp_path / "ring-nvlink-bigger-batch", mode="ring", regime="nvlink", batch=4
    )
    no_manifest = tmp_path / "bare"
    no_manifest.mkdir()
    store = RunStore([other_model, other_regime, fused, unfused, lone, no_manifest], cache=None)
    assert store.suggested_baseline("chunked-shm") == "none-shm"
    assert store.suggested_baseline("none-shm") is None  # an unfused run is its own baseline
    # no unfused run with batch 4
    assert store.suggested_baseline("ring-nvlink-bigger-batch") is None
    assert store.suggested_baseline("bare") is None
    with pytest.raises(UnknownRun):
        store.suggested_baseline(str(fused))


def test_a_port_whose_last_connection_was_just_closed_is_free_to_listen_on_again():
    """After Ctrl-C the server's end of its last connections waits in TIME_WAIT; the port is free
    for a new server (which binds with SO_REUSEADDR), so the pre-check must not refuse it."""
    import socket

    from tpscope.dashboards.dash_command import check_port_free

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()  # the server's side closes first: its end goes to TIME_WAIT
    time.sleep(0.1)
    client.close()
    server.close()
    check_port_free("127.0.0.1", port)
    live = socket.socket()
    live.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as any server does
    live.bind(("127.0.0.1", port))
    live.listen()
    try:
        with pytest.raises(UserError, match=f"cannot listen on 127.0.0.1:{port}"):
            check_port_free("127.0.0.1", port)  # a live listener still holds it
    finally:
        live.close()


def test_flux_efficiency_is_not_offered_between_runs_of_different_regimes(tmp_path):
    common = {"tp": 2, "model": {"layers": 2}, "dtype": "bfloat16", "seq_len": 8192, "batch": 1}
    fused, nvlink = tmp_path / "fused", tmp_path / "nvlink-unfused"
    for src, dst, extra in (
        (CHUNKED, fused, {"mode": "chunked", "regime": "shm"}),
        (UNFUSED, nvlink, {"mode": "none", "regime": "nvlink"}),
    ):
        shutil.copytree(src, dst)
        (dst / "tpscope_run.jsonc").write_text(json.dumps({**common, **extra}))
    store = RunStore([fused, nvlink])
    assert store.incomparable("fused", "nvlink-unfused") == "regime shm vs nvlink"
    assert store.suggested_baseline("fused") is None
    (nvlink / "tpscope_run.jsonc").write_text(
        json.dumps({**common, "mode": "none", "regime": "shm"})
    )
    assert store.incomparable("fused", "nvlink-unfused") is None


def _raw_get(port: int, host_header: str, path: str = "/_dash-layout") -> int:
    """Status of a real HTTP request to 127.0.0.1:port carrying `host_header` as its Host."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host_header)
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def test_tpscope_dash_answers_only_its_own_names_in_host(tmp_path):
    """A page of another site, its name resolved to 127.0.0.1 (DNS rebinding), gets 403."""
    with _dash_server(tmp_path, (CHUNKED,)) as (proc, port):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                first = _raw_get(port, f"127.0.0.1:{port}")
                break
            except ConnectionError:
                time.sleep(0.2)
        else:
            raise AssertionError(
                proc.stdout.read().decode() if proc.poll() is not None else "no answer"
            )
        assert first == 200
        assert _raw_get(port, f"localhost:{port}") == 200
        assert _raw_get(port, "localhost") == 200
        assert _raw_get(port, f"[::1]:{port}") == 200
        for foreign in (
            f"evil.example:{port}",
            "evil.example",
            f"127.0.0.1.evil.example:{port}",
            f"10.0.0.1:{port}",
        ):
            assert _raw_get(port, foreign) == 403, foreign
            assert _raw_get(port, foreign, "/") == 403, foreign


def test_host_names_bound_to_an_address_and_to_every_address():
    from tpscope.dashboards.host_check import allowed_hosts, host_name

    assert host_name("LocalHost:8050") == "localhost" and host_name("[::1]:8050") == "::1"
    assert host_name("::1") == "::1" and host_name("10.1.2.3") == "10.1.2.3"
    assert allowed_hosts("127.0.0.1") == {"localhost", "127.0.0.1", "::1"}
    assert allowed_hosts("10.1.2.3") == {"localhost", "127.0.0.1", "::1", "10.1.2.3"}
    everywhere = allowed_hosts("0.0.0.0")
    import socket

    assert socket.gethostname().lower() in everywhere and "0.0.0.0" not in everywhere


def test_hta_gives_its_breakdowns_on_a_sample_run_and_one_line_on_a_cpu_run():
    cpu = REPO / "tests" / "data" / "cpu-gloo-tiny"
    store = RunStore([CHUNKED, cpu], cache=None)
    result = store.hta(CHUNKED.name)
    assert result.error is None
    assert sorted(result.temporal["rank"].tolist()) == [r.rank for r in load_run(CHUNKED).ranks]
    assert store.hta_cached(CHUNKED.name)  # the status line then says nothing more
    on_cpu = store.hta(cpu.name)
    assert on_cpu.error and len(on_cpu.error.splitlines()) == 1
    assert "CPU run" in on_cpu.error and "Error" not in on_cpu.error
    # without the rule, HTA itself fails on this run (why the line is given instead)
    from tpscope.dashboards.store import run_hta

    files = {r.rank: str(Path(r.path).resolve()) for r in load_run(cpu).ranks}
    assert run_hta(files).error


def test_where_hta_stops_on_one_breakdown_the_other_shows_and_the_line_says_which_check():
    """On the CPU-bound GPT-2 sample run HTA's temporal breakdown stops on a bare `assert` of its
    own; its idle-time breakdown works. The tab shows that one, HTA's own frame, and says which
    check stopped the other instead of a bare "AssertionError"."""
    import pytest
    from hta.common.trace import Trace
    from hta.trace_analysis import TraceAnalysis

    from tpscope.dashboards.store import run_hta

    run = REPO / "sample_traces" / "h200x1-foreign-gpt2-cpubound"
    files = {r.rank: str(Path(r.path).resolve()) for r in load_run(run).ranks}
    direct = TraceAnalysis.__new__(TraceAnalysis)
    direct.t = Trace(trace_files=files)
    direct.t.load_traces(
        include_last_profiler_step=True, use_multiprocessing=False, use_memory_profiling=False
    )
    with pytest.raises(AssertionError):
        direct.get_temporal_breakdown(visualize=False)
    idle, _ = direct.get_idle_time_breakdown(ranks=sorted(files), visualize=False)

    result = run_hta(files)
    assert result.error is None and result.temporal is None
    assert result.idle.equals(idle)
    assert len(result.partial.splitlines()) == 1
    assert "temporal breakdown" in result.partial and "assert " in result.partial, result.partial
