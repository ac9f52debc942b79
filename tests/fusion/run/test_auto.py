"""`--mode auto`: the decision rule, the probed shapes, and a probe in a world of 2 that every
rank agrees on and that the cache then answers."""

from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist

from tests.fusion._dist import run_world, scratch_dir
from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.ops import compat
from tpscope.fusion.run.auto import (
    auto_plan,
    cache_key,
    candidates,
    contender,
    decide,
    kind_shapes,
    sm_margins,
)
from tpscope.fusion.run.config import RunConfig
from tpscope.runfolder.fusion_choice import FusionChoice


def _t(median, p10=None, p90=None):
    return {
        "median_ms": median,
        "p10_ms": median if p10 is None else p10,
        "p90_ms": median if p90 is None else p90,
    }


def test_decide_keeps_unfused_unless_a_fusion_wins_clearly():
    choice, why = decide({"none": _t(10.0, 9.8), "chunked/k2": _t(8.0, 7.9, 8.2), "ring": _t(9.0)})
    assert choice == FusionChoice(mode="chunked", chunks=2) and "chunked/k2 8.000 ms" in why
    choice, why = decide({"none": _t(10.0), "ring/k4": _t(9.95)})  # 0.5 % faster: keep unfused
    assert choice == FusionChoice(mode="none") and "clearly" in why
    # 6 % faster by the median, but the spreads overlap (a noisy link): keep unfused
    choice, _ = decide({"none": _t(10.0, 9.0, 11.0), "chunked/k2": _t(9.4, 8.8, 9.9)})
    assert choice == FusionChoice(mode="none")
    choice, _ = decide({"none": _t(10.0), "symm_mem": {"error": "x"}, "ring": _t(12.0)})
    assert choice == FusionChoice(mode="none")


def test_a_contender_is_rematched_only_when_no_candidate_won_clearly_but_its_median_is_ahead():
    noisy = {
        "none": _t(10.0, 9.0, 11.0),
        "chunked/k2": _t(9.4, 8.8, 9.9),
        "ring": _t(9.7, 9.5, 9.9),
    }
    assert contender(noisy) == "chunked/k2"
    assert contender({**noisy, "ring/k2": _t(8.0, 7.9, 8.1)}) is None  # ring/k2 wins clearly
    # 0.5 %: not worth it
    assert contender({"none": _t(10.0, 9.0), "ring": _t(9.95, 9.0, 11.0)}) is None
    assert contender({"none": _t(10.0), "symm_mem": {"error": "x"}}) is None


def test_decide_takes_the_contender_that_won_the_paired_rematch():
    noisy = {"none": _t(10.0, 9.0, 11.0), "chunked/k2/m16": _t(9.4, 8.8, 9.9)}

    def paired(median, p90):
        return {
            "candidate": "chunked/k2/m16",
            "pairs": 20,
            "median_ratio": median,
            "p10_ratio": median - 0.02,
            "p90_ratio": p90,
        }

    choice, why = decide(noisy, paired(0.95, 0.98))
    assert (
        choice == FusionChoice(mode="chunked", chunks=2, sm_margin=16)
        and "20 round-robin pairs" in why
    )
    for median, p90 in ((0.95, 1.01), (0.995, 0.998)):  # slower in some pairs; or not 1 % ahead
        choice, why = decide(noisy, paired(median, p90))
        assert choice == FusionChoice(mode="none") and f"{median:.3f}x" in why
    # a clear winner is kept whatever the rematch of another said
    clear = {**noisy, "ring/k4": _t(8.0, 7.9, 8.1)}
    assert decide(clear, paired(0.9, 0.95))[0] == FusionChoice(mode="ring", chunks=4)


def test_decide_reads_the_sm_margin_of_the_winner():
    choice, why = decide(
        {"none": _t(10.0, 9.9), "chunked/k2": _t(9.0, 8.9, 9.1), "chunked/k2/m8": _t(8.0, 7.9, 8.1)}
    )
    assert choice == FusionChoice(mode="chunked", chunks=2, sm_margin=8) and "chunked/k2/m8" in why
    for c in candidates(8, torch.device("cpu"), "nvlink", (0, 8)):
        assert decide({"none": _t(10.0), c.label: _t(1.0)})[0] == c or c.mode == "none"


def test_candidates_cover_each_margin():
    got = [
        (c.mode, c.chunks, c.sm_margin)
        for c in candidates(2, torch.device("cpu"), "nvlink", (0, 8))
    ]
    assert got == [
        ("none", 1, 0),
        ("chunked", 1, 0),
        ("chunked", 2, 0),
        ("ring", 1, 0),
        ("ring", 2, 0),
        ("chunked", 1, 8),
        ("chunked", 2, 8),
        ("ring", 1, 8),
        ("ring", 2, 8),
    ]
    assert sm_margins(RunConfig(out_dir="x", fusion=FusionChoice(sm_margin=8))) == (0, 8, 16)


def test_off_nvlink_at_two_ranks_the_ring_is_also_probed_with_its_all_gather_exchange():
    def rings(regime, tp):
        return [
            (c.chunks, c.sm_margin, c.ring_all_gather)
            for c in candidates(2, torch.device("cpu"), regime, (0, 8), tp)
            if c.mode == "ring"
        ]

    both = [(k, m, x) for m in (0, 8) for k in (1, 2) for x in (False, True)]
    assert rings("shm", 2) == both and rings("socket", 2) == both
    assert all(not x for *_, x in rings("nvlink", 2)) and all(not x for *_, x in rings("shm", 4))
    # a probe's key names the exchange, and the decision reads it back
    for c in candidates(4, torch.device("cpu"), "shm", (0, 16)):
        assert decide({"none": _t(10.0), c.label: _t(1.0)})[0] == c or c.mode == "none"
    assert (
        FusionChoice(mode="ring", chunks=4, sm_margin=16, ring_all_gather=True).label
        == "ring/k4/m16/agx"
    )


def test_probed_shapes_are_the_layers_forward_and_backward_ops():
    cfg = RunConfig(out_dir="x", seq_len=64, batch=2, model=ModelConfig(hidden=32, heads=4, ffn=96))
    s = kind_shapes(cfg, tp=2)  # 128 tokens, 64 per rank
    assert s["mlp.fc1"] == {"fwd": ("ag", 64, 32, 48), "bwd": ("rs", 128, 48, 32)}
    assert s["mlp.fc2"] == {"fwd": ("rs", 128, 48, 32), "bwd": ("ag", 64, 32, 48)}
    assert s["attn.qkv"]["fwd"] == ("ag", 64, 32, 48) and s["attn.out"]["fwd"] == (
        "rs",
        128,
        16,
        32,
    )
    assert s["head"] == {"fwd": ("ag", 64, 32, 256), "bwd": ("rs", 128, 256, 32)}  # vocab 512 / 2


def test_a_probe_under_other_nccl_settings_is_not_reused():
    cfg = RunConfig(out_dir="x", device="cpu")
    specs = {"fwd": ("ag", 64, 32, 48)}

    def key(environ):
        return cache_key(cfg, 2, torch.device("cpu"), "shm", specs, environ)

    base = {"NCCL_P2P_DISABLE": "1", "NCCL_P2P_PCI_CHUNKSIZE": "524288", "PATH": "/bin"}
    assert key(base) == key(
        {**base, "PATH": "/usr/bin", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ENV"}
    )
    assert key(base) != key({**base, "NCCL_P2P_PCI_CHUNKSIZE": "131072"})
    assert key(base) != key({**base, "TORCH_NCCL_HIGH_PRIORITY": "0"})
    assert key(base) != key({k: v for k, v in base.items() if k != "NCCL_P2P_PCI_CHUNKSIZE"})


def test_candidates_follow_legality_and_regime():
    cpu = candidates(6, torch.device("cpu"), "nvlink")
    assert [(c.mode, c.chunks) for c in cpu] == [
        ("none", 1),
        ("chunked", 1),
        ("chunked", 2),
        ("ring", 1),
        ("ring", 2),
    ]
    assert all(c.mode != "symm_mem" for c in candidates(8, torch.device("cuda"), "shm"))


def test_copy_engine_is_a_candidate_on_cuda_nvlink_only(monkeypatch):
    # a build with symmetric memory
    monkeypatch.setattr(compat, "symm_mem_ops", lambda: ("ag", "rs"))
    nvlink = [(c.mode, c.chunks) for c in candidates(6, torch.device("cuda"), "nvlink")]
    assert ("copy_engine", 1) in nvlink and ("copy_engine", 2) in nvlink
    for regime in ("shm", "socket"):  # peer copies would bypass the link the regime stands for
        assert all(c.mode != "copy_engine" for c in candidates(6, torch.device("cuda"), regime))
    assert all(c.mode != "copy_engine" for c in candidates(6, torch.device("cpu"), "nvlink"))
    odd = [
        (c.mode, c.chunks)
        for c in candidates(3, torch.device("cuda"), "nvlink")
        if c.mode == "copy_engine"
    ]
    assert odd == [("copy_engine", 1)]  # 3 rows do not split into 2 copies


def test_host_staged_is_a_candidate_off_nvlink_only():
    for device in ("cpu", "cuda"):
        for regime in ("shm", "socket"):  # no peer access: the transfers go through host memory
            got = [
                (c.mode, c.chunks)
                for c in candidates(8, torch.device(device), regime)
                if c.mode == "host_staged"
            ]
            assert got == [("host_staged", 1), ("host_staged", 2), ("host_staged", 4)]
        assert all(c.mode != "host_staged" for c in candidates(8, torch.device(device), "nvlink"))
    odd = [c.chunks for c in candidates(6, torch.device("cuda"), "shm") if c.mode == "host_staged"]
    assert odd == [1, 2]  # 6 rows do not split into 4 pieces
    for c in candidates(8, torch.device("cpu"), "shm", (0, 16)):  # the decision reads its key back
        assert decide({"none": _t(10.0), c.label: _t(1.0)})[0] == c or c.mode == "none"


def _probe(rank: int, world: int, cache: str, out: str) -> None:
    cfg = RunConfig(
        out_dir="x",
        device="cpu",
        dtype="float32",
        seq_len=16,
        batch=2,
        auto_cache=cache,
        model=ModelConfig(layers=1, hidden=16, ffn=32, heads=2, vocab=16),
    )
    said: list[str] = []
    plan, info = auto_plan(cfg, world, torch.device("cpu"), "nvlink", said.append)
    first = {k: (c["mode"], c["chunks"], c["source"]) for k, c in info["choices"].items()}
    plan2, info2 = auto_plan(cfg, world, torch.device("cpu"), "nvlink", said.append)
    second = {k: (c["mode"], c["chunks"], c["source"]) for k, c in info2["choices"].items()}
    assert all(src == "probe" for *_, src in first.values()) and all(
        src == "cache" for *_, src in second.values()
    )
    assert {k: v[:2] for k, v in first.items()} == {k: v[:2] for k, v in second.items()}
    margin = info["choices"]["mlp.fc1"]["sm_margin"]
    assert plan("block0.mlp.fc1") == FusionChoice(
        mode=first["mlp.fc1"][0], chunks=first["mlp.fc1"][1], sm_margin=margin
    )
    everyone: list = [None] * world
    dist.all_gather_object(everyone, first)
    assert all(e == everyone[0] for e in everyone)  # every rank fuses the same way
    if rank == 0:
        with open(os.path.join(out, "info.json"), "w") as fh:
            json.dump(info, fh)
        with open(os.path.join(out, "said.json"), "w") as fh:
            json.dump(said, fh)


def _rematch(rank: int, world: int, out: str) -> None:
    import time

    from tpscope.fusion.run.auto import rematch

    calls: list[str] = []

    def step(c: FusionChoice) -> None:  # the contender takes half unfused's time
        calls.append(c.mode)
        time.sleep(0.004 if c.mode == "none" else 0.002)

    got = rematch(step, "chunked/k2/m16", torch.device("cpu"))
    if rank == 0:
        with open(os.path.join(out, "rematch.json"), "w") as fh:
            json.dump({"got": got, "calls": calls}, fh)


def test_rematch_times_unfused_and_the_contender_in_turn():
    out = scratch_dir()
    run_world(_rematch, 2, out)
    data = json.load(open(os.path.join(out, "rematch.json")))
    got, calls = data["got"], data["calls"]
    assert got["candidate"] == "chunked/k2/m16" and got["pairs"] == 20
    assert 0.35 < got["median_ratio"] < 0.75 and got["p90_ratio"] < 1
    # a warm-up sample of each, then 20 pairs, each sample PROBE_BATCH steps back to back
    sample = [["none"] * 3, ["chunked"] * 3]
    assert calls == [m for _ in range(21) for pair in sample for m in pair]


def test_probe_is_shared_by_the_ranks_and_cached():
    out = scratch_dir()
    cache = os.path.join(out, "cache.json")
    run_world(_probe, 2, cache, out)
    cached = json.load(open(cache))
    assert len(cached) == 5 and all("timings_ms" in e and "why" in e for e in cached.values())
    info = json.load(open(os.path.join(out, "info.json")))
    # a line before each kind's probe (its candidates: 16 rows per rank at this shape, nvlink on CPU:
    # unfused, chunked and ring at k = 1, 2, 4, 8 and margins 0 and 16), then its choice; then the cache
    said = json.load(open(os.path.join(out, "said.json")))
    assert said[0] == "auto: probing attn.qkv: 17 candidates, forward + backward of its shapes"
    picked = info["choices"]["attn.qkv"]
    label = FusionChoice(
        mode=picked["mode"],
        chunks=picked["chunks"],
        sm_margin=picked["sm_margin"],
        ring_all_gather=picked["ring_all_gather"],
    ).label  # its syntax: tests/runfolder
    assert said[1].startswith(f"auto: attn.qkv -> {label} (") and "probed in" in said[1]
    assert len(said) == 15 and all(f"cached in {cache}" in line for line in said[10:])
    assert info["cache_file"] == cache and set(info["choices"]) == {
        "attn.qkv",
        "attn.out",
        "mlp.fc1",
        "mlp.fc2",
        "head",
    }
