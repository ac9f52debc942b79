"""`tpscope report` end to end on real H200 runs: verdicts, exit codes, files, JUnit and JSON."""

from __future__ import annotations

import json

import pytest
from junitparser import Failure, JUnitXml, Skipped

from tests.report._runs import (
    CHUNKED,
    DATA,
    UNFUSED,
    copy_run,
    manifest,
    real_unfused,
    stretched_copy,
)
from tpscope.cli import main

BASE = real_unfused()


def report(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["report", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def slower(tmp_path_factory):
    """The unfused run with every step 10% slower (its real events, times stretched by 1.10; its
    manifest's step times too, when it has one)."""
    return stretched_copy(BASE, tmp_path_factory.mktemp("slow") / "slower", 1.10)


def test_a_run_against_itself_passes(capsys):
    code, out, _ = report(capsys, BASE, "--baseline", BASE)
    assert code == 0
    assert "PASS" in out.splitlines()[2]
    assert "❌" not in out and "⚠️" not in out  # nothing regressed, nothing worse


def test_ten_percent_slower_steps_fail_and_name_the_metric(capsys, slower):
    code, out, _ = report(capsys, slower, "--baseline", BASE)
    assert code == 1
    verdict = out.splitlines()[2]
    assert "REGRESSION" in verdict and "step_time +10.0%" in verdict
    if (BASE / "tpscope_run.jsonc").is_file():  # 1 / 1.1 of the tokens per second
        assert "tokens_per_s -9.1%" in verdict
    # ratios do not change when every time is stretched: they must not be blamed
    assert "exposed_comm_ratio" not in verdict


def test_ten_percent_faster_steps_pass_as_improved(capsys, slower):
    code, out, _ = report(capsys, BASE, "--baseline", slower)
    line = out.splitlines()[2]
    assert code == 0 and "PASS" in line and "improved" in line


def test_real_runs_give_the_verdict_in_the_right_direction(capsys):
    # steady steps 3-4 (the first profiled step left out): shm-chunked4 3,863.2 and 3,864.0 µs,
    # nvlink-unfused 1,670.8 and 1,675.3 µs (`tpscope analyze`): medians 3,863.6 / 1,673.05 = +130.9%
    code, out, _ = report(capsys, CHUNKED, "--baseline", UNFUSED)
    assert code == 1 and "step_time +130.9%" in out
    code, out, _ = report(capsys, UNFUSED, "--baseline", CHUNKED)
    assert code == 0 and "improved" in out.splitlines()[2]


def test_the_looser_threshold_lets_a_ten_percent_slowdown_pass(capsys, slower):
    code, _, _ = report(
        capsys, slower, "--baseline", BASE, "--fail-on", "step_time=+12%,tokens_per_s=-12%"
    )
    assert code == 0


def test_throughput_bought_with_memory_fails(capsys, tmp_path):
    """Faster steps but 10% more peak memory: a regression under the default +5% memory limit."""
    base_ms = [50.0, 10.0, 10.1, 9.9, 10.0, 10.05, 9.95]
    base = copy_run(UNFUSED, tmp_path / "base", manifest(base_ms, 100 * 2**30))
    cand = copy_run(UNFUSED, tmp_path / "cand", manifest([t * 0.8 for t in base_ms], 110 * 2**30))
    code, out, _ = report(capsys, cand, "--baseline", base)
    assert code == 1
    verdict = out.splitlines()[2]
    assert "peak_memory +10.0%" in verdict and "tokens_per_s" not in verdict
    # tokens/s from the manifest's timed steps (the 50 ms warm-up step left out): 4096 / 10 ms
    row = next(line for line in out.splitlines() if "`tokens_per_s`" in line)
    assert "409,600" in row and "512,000" in row and "improved" in row


def test_without_a_manifest_throughput_and_memory_are_unknown_not_zero(capsys, tmp_path):
    code, out, _ = report(capsys, UNFUSED, "--baseline", UNFUSED, "--format", "json")
    doc = json.loads(out)
    by_metric = {c["metric"]: c for c in doc["comparisons"]}
    assert by_metric["tokens_per_s"]["status"] == "unknown"
    assert by_metric["tokens_per_s"]["baseline_median"] is None
    assert by_metric["peak_memory_bytes"]["candidate_median"] is None
    assert doc["exit_code"] == code == 0


def test_one_run_alone_is_a_report_without_verdict(capsys):
    code, out, _ = report(capsys, CHUNKED)
    assert code == 0
    assert "no baseline" in out and "_allgather_base" in out and "8 x 8 MiB" in out


def test_out_writes_every_format_and_junit_reads_back(capsys, tmp_path, slower):
    out_dir = tmp_path / "r"
    code, out, _ = report(capsys, slower, "--baseline", BASE, "--out", out_dir)
    assert code == 1 and "REGRESSION" in out
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == ["report.html", "report.json", "report.junit.xml", "report.md"]
    xml = JUnitXml.fromfile(str(out_dir / "report.junit.xml"))
    cases = {c.name: c for suite in xml for c in suite}
    assert set(cases) == {
        "step_time within +3%",
        "exposed_comm_ratio within +0.02",
        "tokens_per_s within -3%",
        "peak_memory within +5%",
    }
    failed = cases["step_time within +3%"].result
    assert len(failed) == 1 and isinstance(failed[0], Failure) and "step_time" in failed[0].message
    assert cases["exposed_comm_ratio within +0.02"].is_passed
    doc = json.loads((out_dir / "report.json").read_text())
    if (
        BASE / "tpscope_run.jsonc"
    ).is_file():  # throughput falls with the slower steps; memory stays
        assert isinstance(cases["tokens_per_s within -3%"].result[0], Failure)
        assert cases["peak_memory within +5%"].is_passed
        assert xml.failures == 2 and xml.tests == 4
        assert doc["verdict"]["regressed"] == ["step_time_us", "tokens_per_s"]
    else:  # no manifest: unknown, skipped
        assert isinstance(cases["tokens_per_s within -3%"].result[0], Skipped)
        assert xml.failures == 1 and xml.tests == 4
        assert doc["verdict"]["regressed"] == ["step_time_us"]
    assert (out_dir / "report.md").read_text().startswith("## tpscope report: ❌ regression")


def test_out_never_overwrites_an_existing_report(capsys, tmp_path):
    out_dir = tmp_path / "r"
    assert report(capsys, UNFUSED, "--out", out_dir)[0] == 0
    before = (out_dir / "report.md").read_text()
    code, out, err = report(capsys, CHUNKED, "--out", out_dir)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--overwrite" in err and "report.md" in err
    assert (out_dir / "report.md").read_text() == before
    assert report(capsys, CHUNKED, "--out", out_dir, "--overwrite")[0] == 0
    assert "h200-shm-chunked4" in (out_dir / "report.md").read_text()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--fail-on", "bogus=+3%"], "unknown metric"),
        (["--format", "pdf"], "unknown format"),
        (["--format", "md,json"], "needs --out"),
        (["--baseline", "/nonexistent/run"], "/nonexistent/run"),
        (
            ["--baseline", str(DATA / "hta" / "cpu_only")],
            "is a CPU run",
        ),  # a GPU run against a CPU run
    ],
)
def test_usage_and_input_errors_exit_2_with_one_line(capsys, argv, words):
    code, out, err = report(capsys, UNFUSED, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err


def test_collectives_show_the_interconnect_bandwidth_of_each_regime(capsys):
    """All-gather bus bandwidth: about 200 GB/s over NVLink and about 25 GB/s in `shm` on 2 x H200."""
    code, out, _ = report(capsys, CHUNKED, "--baseline", UNFUSED, "--format", "json")
    rows = {d["collective"]: d for d in json.loads(out)["collectives"]}
    ag = rows["_allgather_base"]
    assert 120 < ag["baseline"]["busbw_gbps"] < 260
    assert 10 < ag["candidate"]["busbw_gbps"] < 40
    # forward and backward
    assert ag["candidate"]["messages"] == "8 x 8 MiB" and ag["baseline"]["messages"] == "2 x 32 MiB"
    assert ag["delta_exposed_us"] > 0 and ag["significant"] is True


def test_manifest_differences_are_listed_and_flux_only_within_one_experiment(capsys, tmp_path):
    ms = [50.0, 10.0, 10.0, 10.0]
    base = copy_run(UNFUSED, tmp_path / "base", manifest(ms, 2**30))
    same = copy_run(
        UNFUSED, tmp_path / "same", {**manifest(ms, 2**30), "mode": "chunked", "chunks": 4}
    )
    other = copy_run(UNFUSED, tmp_path / "other", {**manifest(ms, 2**30), "regime": "shm"})
    doc = json.loads(report(capsys, same, "--baseline", base, "--format", "json")[1])
    assert doc["config_changes"] == [["mode", "none", "chunked"], ["chunks", "1", "4"]]
    # same traces: T_fused = T_base
    assert doc["flux_overlap_efficiency"] == pytest.approx(0.0, abs=1e-9)
    code, out, _ = report(capsys, other, "--baseline", base)
    assert "regime: nvlink → shm" in out and "Flux" not in out
    # the fusion's resource options are part of the fusion: listed, and Flux still computed
    tuned = copy_run(
        UNFUSED,
        tmp_path / "tuned",
        {
            **manifest(ms, 2**30),
            "mode": "chunked",
            "chunks": 4,
            "sm_margin": 16,
            "bwd_overlap": True,
        },
    )
    doc = json.loads(report(capsys, tuned, "--baseline", base, "--format", "json")[1])
    assert ["sm_margin", "?", "16"] in doc["config_changes"] and [
        "bwd_overlap",
        "?",
        "True",
    ] in doc["config_changes"]
    assert doc["flux_overlap_efficiency"] is not None


def test_nccl_settings_that_differ_are_listed_and_keep_the_runs_one_experiment(capsys, tmp_path):
    ms = [50.0, 10.0, 10.0, 10.0]
    env = {"NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN", "TORCH_NCCL_HIGH_PRIORITY": "1"}
    base = copy_run(UNFUSED, tmp_path / "base", {**manifest(ms, 2**30), "nccl_env": env})
    tuned = copy_run(
        UNFUSED,
        tmp_path / "tuned",
        {
            **manifest(ms, 2**30),
            "mode": "ring",
            "chunks": 4,
            "nccl_env": {
                **env,
                "NCCL_DEBUG": "INFO",
                "NCCL_P2P_PCI_CHUNKSIZE": "524288",
                "TORCH_NCCL_HIGH_PRIORITY": "0",
            },
        },
    )
    doc = json.loads(report(capsys, tuned, "--baseline", base, "--format", "json")[1])
    # NCCL_DEBUG only logs
    assert doc["config_changes"] == [
        ["mode", "none", "ring"],
        ["chunks", "1", "4"],
        ["NCCL_P2P_PCI_CHUNKSIZE", "unset", "524288"],
        ["TORCH_NCCL_HIGH_PRIORITY", "1", "0"],
    ]
    assert doc["flux_overlap_efficiency"] is not None
    out = report(capsys, tuned, "--baseline", base)[1]
    assert "NCCL_P2P_PCI_CHUNKSIZE: unset → 524288" in out
    # a folder without a manifest says nothing of its settings: nothing to compare
    bare = copy_run(UNFUSED, tmp_path / "bare", None)
    (bare / "tpscope_run.jsonc").unlink(missing_ok=True)
    doc = json.loads(report(capsys, tuned, "--baseline", bare, "--format", "json")[1])
    assert not any(k.startswith("NCCL") for k, *_ in doc["config_changes"])


def test_the_breakdown_splits_the_step_without_double_counting(capsys):
    """compute + exposed comm + memory alone + idle = the mean step of a rank (`tpscope analyze`),
    the first profiled step left out in both (metrics.md §3)."""
    main(["analyze", str(CHUNKED), "--json"])
    steps = [s for s in json.loads(capsys.readouterr().out)["steps"] if not s["first_step"]]
    assert 0 < len(steps) < 6
    mean_step = sum(s["step_time_us"] for s in steps) / len(steps)
    hidden = sum(s["hidden_comm_us"] for s in steps) / len(steps)
    doc = json.loads(report(capsys, CHUNKED, "--format", "json")[1])
    (parts,) = doc["breakdown_us"]
    parts = dict(parts)
    assert sum(
        parts[k] for k in ("compute", "exposed comm", "memory alone", "idle")
    ) == pytest.approx(mean_step)
    assert parts["hidden comm (under compute)"] == pytest.approx(hidden) and hidden > 0


def test_a_memory_ceiling_fails_the_run_and_its_own_junit_case(capsys, tmp_path):
    ms = [50.0, 10.0, 10.0, 10.0]
    base = copy_run(UNFUSED, tmp_path / "base", manifest(ms, 70 * 2**30))
    cand = copy_run(UNFUSED, tmp_path / "cand", manifest(ms, 72 * 2**30))  # +2.9%: within +5%
    out_dir = tmp_path / "r"
    code, out, _ = report(
        capsys, cand, "--baseline", base, "--fail-on", "peak_memory<=71GiB", "--out", out_dir
    )
    assert code == 1 and "peak_memory 72.00 GiB (limit <=71GiB)" in out
    cases = {
        c.name: c for suite in JUnitXml.fromfile(str(out_dir / "report.junit.xml")) for c in suite
    }
    assert cases["peak_memory within +5%"].is_passed
    assert isinstance(cases["peak_memory <=71GiB"].result[0], Failure)
