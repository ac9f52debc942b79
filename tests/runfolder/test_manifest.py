"""The typed manifest: validated once when it is read. A mistyped field is a one-line error naming
the file and the field (exit 2 from the CLI), never used as a guess (a boolean is not a number)
and never a traceback; older manifests (fields missing) read with those fields unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kineto import RankTrace, write_run
from tpscope.cli import main
from tpscope.report.step_samples import manifest_samples
from tpscope.runfolder.layout import MANIFEST_NAME
from tpscope.runfolder.manifest import (
    FIELDS,
    SCHEMA_VERSION,
    Manifest,
    ManifestError,
    incomplete,
    manifest_from_dict,
    read_manifest,
    write_manifest,
)
from tpscope.trace import load_run

ROOT = Path(__file__).resolve().parents[2]


def one_rank_run(folder, manifest: dict):
    r = RankTrace(0, world_size=1)
    for step in (1, 2, 3):
        r.gpu_annotation(f"ProfilerStep#{step}", step * 100, 100)
        r.kernel("gemm", step * 100, 50)
    return write_run(folder, [r], manifest=manifest)


def test_a_boolean_is_not_a_number_of_tokens(tmp_path, capsys):
    run = one_rank_run(
        tmp_path / "run", {"tokens_per_step": True, "step_times_ms": [10.0, 10.0, 10.0]}
    )
    with pytest.raises(
        ManifestError, match="field tokens_per_step must be a finite number > 0, not True"
    ):
        load_run(run)
    assert main(["analyze", str(run), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and MANIFEST_NAME in err[0] and "tokens_per_step" in err[0]


def test_the_same_manifest_with_a_number_gives_tokens_per_second(tmp_path):
    run = load_run(
        one_rank_run(tmp_path / "run", {"tokens_per_step": 64, "step_times_ms": [10.0, 20.0]})
    )
    assert isinstance(run.manifest, Manifest) and run.manifest.tokens_per_step == 64
    values, _ = manifest_samples(run.manifest)
    assert values["tokens_per_s"].tolist() == [6400.0, 3200.0]  # 64 tokens / 0.01 s and / 0.02 s


def test_a_string_nccl_env_stops_the_report_in_one_line(tmp_path, capsys):
    run = one_rank_run(tmp_path / "run", {"nccl_env": "NCCL_P2P_DISABLE=1", "mode": "chunked"})
    assert main(["report", str(run), "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert "field nccl_env must be an object of strings" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "field, value",
    [
        ("tokens_per_s", True),
        ("tokens_per_s", "fast"),
        ("tokens_per_s", -5),
        ("peak_memory_bytes", False),
        ("step_times_ms", [1.0, "x"]),
        ("timed_steps", [1, True]),
        ("nccl_env", ["NCCL_ALGO"]),
        ("chunks", 2.5),
        ("mode", 3),
        ("bwd_overlap", "yes"),
        ("model", "big"),
        ("losses", [1.0, "x"]),
        ("command", "tpscope run"),
    ],
)
def test_each_mistyped_field_is_an_error_naming_it(field, value):
    with pytest.raises(ManifestError) as got:
        manifest_from_dict({field: value, "steps": 8}, "m.json")
    assert str(got.value).startswith(f"m.json: field {field} must be ") and "\n" not in str(
        got.value
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("tokens_per_s", 1.5e5),
        ("peak_memory_bytes", 0),
        ("tokens_per_s", None),
        ("nccl_env", {"NCCL_ALGO": "Ring"}),
        ("timed_steps", [1, 2]),
        ("losses", [3.0, float("nan")]),
    ],
)
def test_well_typed_fields_and_nulls_are_kept(field, value):
    m = manifest_from_dict({field: value}, "m.json")
    assert getattr(m, field) == value or value != value  # NaN is kept (a diverged loss is measured)
    assert m.steps is None  # absent: unknown


def test_unknown_fields_are_kept_and_written_back(tmp_path):
    m = manifest_from_dict({"mode": "ring", "from_a_newer_writer": [1, 2]}, "m.json")
    assert m.mode == "ring" and dict(m.extra) == {"from_a_newer_writer": [1, 2]}
    back = json.loads(write_manifest(tmp_path, m).read_text())
    assert back["from_a_newer_writer"] == [1, 2] and back["mode"] == "ring"
    assert read_manifest(tmp_path) == m


def test_the_older_name_is_read_and_hta_reads_the_folder_as_its_ranks(tmp_path):
    import shutil

    from hta.common.trace_file import get_trace_files

    (tmp_path / "tpscope_run.json").write_text(json.dumps({"mode": "ring"}))
    assert read_manifest(tmp_path).mode == "ring"
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"mode": "chunked"}))
    assert read_manifest(tmp_path).mode == "chunked"  # the current name first
    # a sample run folder as it is: HTA finds its two ranks' traces, not the manifest
    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "h200x2-shm-chunked"
    run = tmp_path / "run"
    shutil.copytree(sample, run)
    files = get_trace_files(str(run))
    assert sorted(files) == [0, 1]
    assert all(Path(f).name.startswith(f"rank{r}.") for r, f in files.items())


def test_a_newer_schema_and_a_broken_file_are_refused(tmp_path):
    with pytest.raises(ManifestError, match=f"schema_version {SCHEMA_VERSION + 1} is newer"):
        manifest_from_dict({"schema_version": SCHEMA_VERSION + 1}, "m.json")
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(ManifestError, match="not a readable manifest"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("[1, 2]")
    with pytest.raises(ManifestError, match="not a JSON object"):
        read_manifest(tmp_path)
    assert read_manifest(tmp_path / "absent") is None


def test_incomplete_keeps_what_was_recorded():
    m = incomplete(Manifest(mode="ring", command=["a"]), "rank 1 died", "9.9", ["b"])
    assert (m.complete, m.stopped, m.mode, m.command, m.finished) == (
        False,
        "rank 1 died",
        "ring",
        ["a"],
        False,
    )
    assert incomplete(None, "x", "9.9", ["b"]).command == ["b"]


@pytest.mark.parametrize(
    "folder",
    sorted(p.parent for p in (ROOT / "sample_traces").glob(f"*/{MANIFEST_NAME}")),
    ids=lambda p: p.name,
)
def test_every_sample_manifest_reads_and_writes_back_its_fields(folder, tmp_path):
    raw = json.loads((folder / MANIFEST_NAME).read_text())
    m = read_manifest(folder)
    assert not m.extra  # every field the runtime wrote is a typed one
    back = json.loads(write_manifest(tmp_path, m).read_text())
    assert {k: v for k, v in back.items() if k in raw} == raw  # the same values, nothing lost
    assert all(back[k] is None for k in back.keys() - raw.keys())  # fields it lacks: unknown


BIG = 10**400  # JSON holds it (Python reads it as an int); no float or 64-bit integer does


@pytest.mark.parametrize(
    "field, value",
    [
        ("tokens_per_step", BIG),
        ("lr", BIG),
        ("lr", -BIG),
        ("step_times_ms", [BIG]),
        ("losses", [BIG, 1.0]),
        ("peak_memory_bytes", BIG),
        ("steps", 2**63),
        ("timed_steps", [1, 2**64]),
        ("count_lists_probe", None),
    ],
)
def test_a_number_past_the_range_of_floats_and_int64_is_an_error_naming_it(field, value):
    if field == "count_lists_probe":  # a field of lists of lists
        field = next(f.name for f in FIELDS if f.metadata["kind"] == "count_lists")
        value = [[1.0, BIG]]
    with pytest.raises(ManifestError) as got:
        manifest_from_dict({field: value}, "m.json")
    text = str(got.value)
    assert text.startswith(f"m.json: field {field} ") and "past the range" in text, text
    assert "\n" not in text and len(text) < 200


def test_a_number_past_float_range_in_a_run_folder_is_exit_2(tmp_path, capsys):
    import shutil

    from tpscope.cli import main

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "h200-nvlink-unfused", run)
    (run / "tpscope_run.json").write_text('{"lr": 1' + "0" * 400 + "}")
    assert main(["analyze", str(run), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tpscope_run.json: field lr" in err
