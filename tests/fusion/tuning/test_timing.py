"""Summary statistics of timed repetitions, and timing regions round robin across ranks."""

from __future__ import annotations

from tpscope.fusion.tuning.timing import summarize


def test_summarize():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.median_ms, t.min_ms, t.max_ms, t.reps) == (3.0, 1.0, 5.0, 5)
    assert t.p10_ms == 1.0 and t.p90_ms == 5.0


def _round_robin(rank: int, world: int, out: str) -> None:
    import json
    import time

    import torch

    from tpscope.fusion.tuning.timing import time_regions

    calls: list[str] = []

    def sleeper(name: str, ms: float):
        def fn():
            calls.append(name)
            time.sleep(ms / 1e3)

        return fn

    # rank 1 is the slow one for "slow": the slowest rank's time counts
    fns = {"slow": sleeper("slow", 2.0 if rank == 0 else 40.0), "fast": sleeper("fast", 5.0)}
    timed = time_regions(fns, device=torch.device("cpu"), reps=4, warmup=1)
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(
                {
                    "calls": calls,
                    "slow": timed["slow"].median_ms,
                    "fast": timed["fast"].median_ms,
                    "reps": timed["slow"].reps,
                },
                fh,
            )


def test_time_regions_alternates_and_takes_the_slowest_rank(tmp_path):
    import json

    from tests.fusion._dist import run_world

    out = tmp_path / "timed.json"
    run_world(_round_robin, 2, str(out))
    got = json.loads(out.read_text())
    # warm-up of each in turn, then one call of each per repetition, alternating
    assert got["calls"] == ["slow", "fast"] + ["slow", "fast"] * 4
    assert got["reps"] == 4
    assert 40.0 <= got["slow"] < 200.0  # rank 1's 40 ms, not rank 0's 2 ms
    assert 5.0 <= got["fast"] < 40.0


def _in_order(rank: int, world: int, out: str) -> None:
    import json
    import time

    import torch

    from tpscope.fusion.tuning.timing import sample_regions

    calls = {"n": 0}

    def slower_each_time():
        calls["n"] += 1
        time.sleep(0.010 * calls["n"])

    got = sample_regions({"grow": slower_each_time}, device=torch.device("cpu"), reps=5, warmup=1)
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(got, fh)


def test_sample_regions_keeps_the_repetitions_in_order(tmp_path):
    import json

    from tests.fusion._dist import run_world

    out = tmp_path / "samples.json"
    run_world(_in_order, 2, str(out))
    got = json.loads(out.read_text())["grow"]
    # the warm-up call slept 10 ms, then 20, 30, 40, 50, 60 ms (a sleep never ends early)
    assert len(got) == 5 and got == sorted(got)
    assert all(10 * (i + 2) <= v < 10 * (i + 2) + 9 for i, v in enumerate(got))
