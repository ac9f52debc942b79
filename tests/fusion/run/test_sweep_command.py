"""`tpscope sweep`: variants, the comparison, and a CPU sweep end to end (baseline + one change),
with the analyzer run as a separate process on each run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fusion._cli import TINY_MODEL, tpscope
from tpscope.errors import UserError
from tpscope.fusion.run.sweep_command import Variant, compare, parse_variants
from tpscope.runfolder.fusion_choice import FusionChoice


def test_parse_variants():
    assert parse_variants("chunked:2, ring ,auto,regime=shm", "nvlink") == [
        Variant(name="chunked-k2", mode="chunked", chunks=2, regime="nvlink"),
        Variant(name="ring-k1", mode="ring", chunks=1, regime="nvlink"),
        Variant(name="auto", mode="auto", chunks=1, regime="nvlink"),
        Variant(name="none-shm", mode="none", chunks=1, regime="shm"),
    ]
    for bad in (
        "fast",
        "chunked:x",
        "regime=ib",
        "chunked:2:margin=x",
        "ring:speed=3",
        "ring:bwd=maybe",
        "auto:embed=1",
        "chunked:ctas=-1",
    ):
        with pytest.raises(UserError):
            parse_variants(bad, "")


def test_parse_variants_with_resource_options():
    assert parse_variants("auto:embed=off", "shm") == [
        Variant(
            name="auto-embedoff",
            mode="auto",
            chunks=1,
            regime="shm",
            changes=(("embed_overlap", False),),
        )
    ]
    assert parse_variants("chunked:8:margin=8:ctas=4:bwd=off,ring:margin=0,auto:bwd=on", "shm") == [
        Variant(
            name="chunked-k8-margin8-ctas4-bwdoff",
            mode="chunked",
            chunks=8,
            regime="shm",
            changes=(("sm_margin", 8), ("comm_ctas", 4), ("bwd_overlap", False)),
        ),
        Variant(
            name="ring-k1-margin0", mode="ring", chunks=1, regime="shm", changes=(("sm_margin", 0),)
        ),
        Variant(
            name="auto-bwdon", mode="auto", chunks=1, regime="shm", changes=(("bwd_overlap", True),)
        ),
    ]
    assert parse_variants("ring:8:margin=4:agx=on", "shm") == [
        Variant(
            name="ring-k8-margin4-agxon",
            mode="ring",
            chunks=8,
            regime="shm",
            changes=(("sm_margin", 4), ("ring_all_gather", True)),
        )
    ]
    with pytest.raises(UserError, match="agx"):
        parse_variants("ring:agx=yes", "shm")


def test_parse_variants_with_nccl_settings():
    assert parse_variants(
        "ring:4:margin=4:NCCL_P2P_PCI_CHUNKSIZE=131072,none:NCCL_BUFFSIZE=16777216", "shm"
    ) == [
        Variant(
            name="ring-k4-margin4-NCCL_P2P_PCI_CHUNKSIZE131072",
            mode="ring",
            chunks=4,
            regime="shm",
            changes=(("sm_margin", 4),),
            env=(("NCCL_P2P_PCI_CHUNKSIZE", "131072"),),
        ),
        Variant(
            name="none-NCCL_BUFFSIZE16777216",
            mode="none",
            chunks=1,
            regime="shm",
            env=(("NCCL_BUFFSIZE", "16777216"),),
        ),
    ]
    for bad, words in (
        ("ring:NCCL_P2P_DISABLE=1", "regime=NAME"),
        ("ring:NCCL_NVLS_ENABLE=1", "always"),
        ("ring:NCCL_BUFFSIZE=", "no value"),
        ("ring:LD_PRELOAD=x", r"NCCL_\*=VALUE"),
    ):
        with pytest.raises(UserError, match=words):
            parse_variants(bad, "shm")


def test_compare_is_relative_to_the_baseline():
    rows = [
        {
            "run": "00-none",
            "regime": "shm",
            "mode": "none",
            "tokens_per_s": 100.0,
            "peak_memory_bytes": 2**30,
            "analyze": {"exposed_comm_ratio": 0.5, "contention_slowdown": None},
        },
        {
            "run": "01-chunked-k8",
            "regime": "shm",
            "mode": "chunked",
            "tokens_per_s": 125.0,
            "peak_memory_bytes": None,
            "analyze": None,
        },
    ]
    table = compare(rows)
    assert "| 00-none | shm | none | 100 | 1.000× | 0.500 | – | 1.00 |" in table
    assert "| 01-chunked-k8 | shm | chunked | 125 | 1.250× | – | – | – |" in table


def test_cpu_sweep_end_to_end(tmp_path):
    out = tmp_path / "sweep"
    done = tpscope(
        "sweep", "--device", "cpu", "--variants", "ring:2:NCCL_P2P_PCI_CHUNKSIZE=131072",
        "--out", str(out), "--steps", "3", "--profile-steps", "1", *TINY_MODEL, "--timeout-s", "60",
        timeout=200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert [r["run"] for r in doc["runs"]] == ["00-none", "01-ring-k2-NCCL_P2P_PCI_CHUNKSIZE131072"]
    # the variant's NCCL setting reached its workers only, over the runtime's default
    recorded = [
        json.loads((out / r["run"] / "tpscope_run.jsonc").read_text())["nccl_env"]
        for r in doc["runs"]
    ]
    assert [e["NCCL_P2P_PCI_CHUNKSIZE"] for e in recorded] == ["524288", "131072"]
    assert (
        doc["runs"][1]["env"] == {"NCCL_P2P_PCI_CHUNKSIZE": "131072"}
        and doc["runs"][0]["env"] == {}
    )
    assert doc["runs"][1]["fusion_by_layer"]["block0.mlp.fc1"] == {
        "mode": "ring",
        "chunks": 2,
        "sm_margin": 0,
        "comm_ctas": 0,
        "bwd_overlap": True,
        "ring_all_gather": False,
    }
    for r in doc["runs"]:
        assert r["tokens_per_s"] > 0
        assert r["analyze"] is not None, r["analyze_note"]  # the analyzer read the run folder
    assert "| 01-ring-k2-NCCL_P2P_PCI_CHUNKSIZE131072 |" in (out / "sweep.md").read_text()


def test_a_failed_variant_is_reported_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    """Workers stubbed: a run that exits 1 is left out of the comparison, named, and makes the
    sweep exit 1; the runs after it still happen."""
    import tpscope.fusion.launch.torchrun as launch_mod
    from tpscope.cli import main

    launched = []

    def fake_launch(
        nproc,
        module,
        args,
        regime,
        prog="tpscope run",
        extra_env=None,
        out_dir=None,
        command=None,
        rdzv=None,
    ):
        cfg = json.loads(args[args.index("--config-json") + 1])
        cfg = {**cfg, **cfg["fusion"], "mode": "auto" if cfg["auto"] else cfg["fusion"]["mode"]}
        launched.append(cfg["mode"])
        assert out_dir == cfg["out_dir"]  # the folder launch marks incomplete when the run fails
        if cfg["mode"] == "ring":
            return 1
        manifest = {
            "regime": "nvlink",
            "tokens_per_s": 100.0 if cfg["mode"] == "none" else 120.0,
            "median_step_time_ms": 1.0,
            "peak_memory_bytes": 1,
            "fusion_by_layer": {},
            "sm_margin": cfg["sm_margin"],
            "comm_ctas": cfg["comm_ctas"],
            "bwd_overlap": cfg["bwd_overlap"],
        }
        Path(cfg["out_dir"], "tpscope_run.jsonc").write_text(json.dumps(manifest))
        return 0

    monkeypatch.setattr(launch_mod, "launch", fake_launch)
    out = tmp_path / "sweep"
    code = main(
        [
            "sweep",
            "--device",
            "cpu",
            "--no-analyze",
            "--variants",
            "ring:2,chunked:2:margin=16",
            "--out",
            str(out),
            "--steps",
            "3",
            "--profile-steps",
            "1",
            *TINY_MODEL,
        ]
    )
    assert code == 1 and launched == ["none", "ring", "chunked"]
    doc = json.loads((out / "sweep.json").read_text())
    assert [r["run"] for r in doc["runs"]] == ["00-none", "02-chunked-k2-margin16"] and doc[
        "failed"
    ] == ["ring-k2"]
    assert doc["runs"][1]["sm_margin"] == 16
    assert "variant ring-k2 failed (exit 1)" in capsys.readouterr().err


def test_a_signal_that_stops_a_variant_stops_the_sweep(tmp_path, monkeypatch):
    """Workers stubbed: the second run stopped by SIGTERM (launch returns 143): no run after it."""
    import tpscope.fusion.launch.torchrun as launch_mod
    from tpscope.cli import main

    launched = []

    def fake_launch(
        nproc,
        module,
        args,
        regime,
        prog="tpscope run",
        extra_env=None,
        out_dir=None,
        command=None,
        rdzv=None,
    ):
        cfg = json.loads(args[args.index("--config-json") + 1])
        cfg = {**cfg, **cfg["fusion"], "mode": "auto" if cfg["auto"] else cfg["fusion"]["mode"]}
        launched.append(cfg["mode"])
        if cfg["mode"] == "ring":
            return 143
        manifest = {
            "regime": "nvlink",
            "tokens_per_s": 100.0,
            "median_step_time_ms": 1.0,
            "peak_memory_bytes": 1,
            "fusion_by_layer": {},
        }
        Path(cfg["out_dir"], "tpscope_run.jsonc").write_text(json.dumps(manifest))
        return 0

    monkeypatch.setattr(launch_mod, "launch", fake_launch)
    code = main(
        [
            "sweep",
            "--device",
            "cpu",
            "--no-analyze",
            "--variants",
            "ring:2,chunked:2",
            "--out",
            str(tmp_path / "sweep"),
            "--steps",
            "3",
            "--profile-steps",
            "1",
            *TINY_MODEL,
        ]
    )
    assert code == 143 and launched == ["none", "ring"]


def test_every_option_default_is_run_configs():
    """The sweep's baseline with no option is RunConfig's defaults, unfused."""
    import argparse

    from tpscope.fusion.run.command import config_from_args
    from tpscope.fusion.run.config import RunConfig
    from tpscope.fusion.run.sweep_command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--out", "s"])
    assert config_from_args(args, "cuda", "s/none") == RunConfig(
        out_dir="s/none", fusion=FusionChoice(mode="none", chunks=1)
    )
    assert [v.chunks for v in parse_variants("chunked,auto,ring,copy_engine", "")] == [4, 1, 1, 1]


def test_a_variant_changes_only_what_it_names():
    """The sweep's own options (here --sm-margin 16 --no-bwd-overlap) stay unless a variant sets
    them; auto probes with them (its fusion unfused)."""
    import argparse

    from tpscope.fusion.run.command import config_from_args
    from tpscope.fusion.run.sweep_command import add_arguments
    from tpscope.runfolder.fusion_choice import FusionChoice

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = config_from_args(
        parser.parse_args(["--out", "s", "--sm-margin", "16", "--no-bwd-overlap"]), "cuda", ""
    )
    ring, auto = parse_variants("ring:4:margin=0,auto:embed=off", "shm")
    cfg = ring.config(base, "s/01")
    assert cfg.fusion == FusionChoice(mode="ring", chunks=4, sm_margin=0, bwd_overlap=False)
    assert (cfg.out_dir, cfg.regime, cfg.auto, cfg.embed_overlap) == ("s/01", "shm", False, True)
    cfg = auto.config(base, "s/02")
    assert (
        cfg.fusion == FusionChoice(mode="none", sm_margin=16, bwd_overlap=False)
        and cfg.auto
        and cfg.mode == "auto"
    )
    assert not cfg.embed_overlap
