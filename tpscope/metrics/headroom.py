"""The run's headroom (metrics.md §11): how much faster a step could be if the transfers of its TP
collectives took no time, from the what-if replay of its dependency graph."""

from __future__ import annotations

from dataclasses import dataclass

from tpscope.trace import Run


@dataclass(frozen=True, slots=True)
class Headroom:
    what: str  # what the replay hides, in words ("all TP communication")
    speedup: float  # measured mean step time / replayed mean step time with it hidden
    changes: tuple[str, ...]  # the `tpscope whatif` changes that give it


def headroom(run: Run) -> Headroom | None:
    """The step-time ratio if every transfer of the run's TP collectives (the kinds of the
    AG-GEMM / GEMM-RS pairs found) took no time, else of every collective; None for a run
    without communication or steps."""
    from tpscope.metrics.whatif import predict, prepare
    from tpscope.metrics.whatif_changes import ChangeError, parse_change

    inp = prepare(run)
    kinds = sorted({"all_gather" if k == "ag_gemm" else "reduce_scatter" for k in inp.pairs.kind})
    texts, what = (
        ([f"hide={','.join(kinds)}"], "all TP communication")
        if kinds
        else (["hide=all"], "all communication")
    )
    try:
        w = predict(inp, [parse_change(t) for t in texts])
    except ChangeError:
        return None
    speedup = w.changes[-1].speedup
    if speedup is None:
        return None
    return Headroom(what, float(speedup), tuple(texts))
