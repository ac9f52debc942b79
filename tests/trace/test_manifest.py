"""The manifest's field types, checked once when it is read: a mistyped field is dropped with a
warning, never used as a guess (a boolean is not a number) and never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.kineto import RankTrace, write_run
from tpscope.cli import main
from tpscope.report.step_samples import manifest_samples
from tpscope.trace import load_run
from tpscope.trace.manifest import check_manifest


def one_rank_run(folder, manifest: dict):
    r = RankTrace(0, world_size=1)
    for step in (1, 2, 3):
        r.gpu_annotation(f"ProfilerStep#{step}", step * 100, 100)
        r.kernel("gemm", step * 100, 50)
    return write_run(folder, [r], manifest=manifest)


def test_a_boolean_is_not_a_number_of_tokens(tmp_path):
    run = load_run(one_rank_run(tmp_path / "run", {"tokens_per_step": True, "step_times_ms": [10.0, 10.0, 10.0]}))
    assert "tokens_per_step" not in run.manifest
    assert any("field tokens_per_step ignored (must be a finite number > 0, not True)" in w for w in run.warnings)
    values, missing = manifest_samples(run.manifest)
    assert "tokens_per_s" not in values and "tokens_per_s" in missing  # unknown, not 1 token / 10 ms


def test_the_same_manifest_with_a_number_gives_tokens_per_second(tmp_path):
    run = load_run(one_rank_run(tmp_path / "run", {"tokens_per_step": 64, "step_times_ms": [10.0, 20.0]}))
    values, _ = manifest_samples(run.manifest)
    assert values["tokens_per_s"].tolist() == [6400.0, 3200.0]  # 64 tokens / 0.01 s and / 0.02 s


def test_a_string_nccl_env_is_ignored_with_a_warning_in_the_report(tmp_path, capsys):
    run = one_rank_run(tmp_path / "run", {"nccl_env": "NCCL_P2P_DISABLE=1", "mode": "chunked"})
    assert main(["report", str(run), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any("field nccl_env ignored (must be an object of strings" in w for w in doc["candidate"]["warnings"])


@pytest.mark.parametrize("field, value", [
    ("tokens_per_s", True), ("tokens_per_s", "fast"), ("tokens_per_s", -5), ("peak_memory_bytes", False),
    ("step_times_ms", [1.0, "x"]), ("timed_steps", [1, True]), ("nccl_env", ["NCCL_ALGO"]),
    ("chunks", 2.5), ("mode", 3), ("bwd_overlap", "yes"), ("model", "big"),
])
def test_each_mistyped_field_is_dropped(field, value):
    clean, warnings = check_manifest({field: value, "steps": 8}, "m.json")
    assert clean == {"steps": 8} and len(warnings) == 1 and f"field {field} ignored" in warnings[0]


@pytest.mark.parametrize("field, value", [("tokens_per_s", 1.5e5), ("peak_memory_bytes", 0), ("tokens_per_s", None),
                                          ("nccl_env", {"NCCL_ALGO": "Ring"}), ("timed_steps", [1, 2])])
def test_well_typed_fields_and_nulls_are_kept(field, value):
    assert check_manifest({field: value}, "m.json") == ({field: value}, [])
