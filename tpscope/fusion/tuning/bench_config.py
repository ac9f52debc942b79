"""What one `tpscope bench` measures: its config, the one place its defaults live (the command's
options take theirs from it). No torch here: the CLI parses options without importing it."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchConfig:
    """What one `tpscope bench` measures."""

    shapes: tuple[str, ...] = ("ref",)
    """Names from SHAPES, or 'S,H,F' triples."""
    sides: tuple[str, ...] = ("ag", "rs")
    modes: tuple[str, ...] = ("chunked", "ring", "symm_mem", "copy_engine")
    chunks: tuple[int, ...] = (2, 4, 8)
    ring_chunks: tuple[int, ...] = (1,)
    """Transfers per ring step to time for `ring`, and copies per peer for `copy_engine`."""
    rank_order: bool = False
    """Also time `chunked` AG-GEMM in rank order (each chunk's GEMM over every rank's rows, the
    first waiting for the first transfer), beside the default own-shard-first order."""
    sm_margins: tuple[int, ...] = (0,)
    """SM margins to time each chunked and ring variant with (tpscope.fusion.ops.resources)."""
    comm_ctas: tuple[int, ...] = (0,)
    """CTA caps of the fused ops' communicator to time each chunked and ring variant with."""
    tapers: tuple[bool | None, ...] = (None,)
    """`chunked` and `ring` with more than one chunk: even pieces (False) and/or the exposed
    piece halved (True, tpscope.fusion.ops.schedule); None: the mode's default (ops.TAPER_BY_DEFAULT)."""
    ring_all_gather: tuple[bool, ...] = (False,)
    """GEMM-RS of `ring` at two ranks: pieces swapped by send/recv (False) and/or all-gather."""
    copy_push: tuple[bool, ...] = (True,)
    """AG-GEMM of `copy_engine`: push (True) and/or pull (False) the shards."""
    feed_ahead_ms: float = 5.0
    """GPU time queued ahead of each timed call (tpscope.fusion.tuning.timing.time_regions; 0: none)."""
    reps: int = 20
    warmup: int = 5
    dtype: str = "bfloat16"
    device: str = "cuda"
    regime: str = ""
    json_path: str = ""
    """The JSON file rank 0 writes (`--out DIR`: DIR/bench.json); empty: none."""
    print_json: bool = False
    """`--json`: rank 0 prints the JSON document instead of the table."""
    timeout_s: float = 300.0


BENCH_DEFAULTS = {f.name: f.default for f in fields(BenchConfig) if f.default is not MISSING}
"""Each field's default, for the command's options."""
