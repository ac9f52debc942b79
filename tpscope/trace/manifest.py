"""The types of the `tpscope_run.json` fields the analyzer reads, checked once when it is read.

A field of the wrong type is dropped with a warning (as if it were absent: unknown, never a
guess). Booleans are not numbers: `"tokens_per_step": true` is not one token. Null is always
allowed (unknown).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: object) -> bool:
    return _number(v) and v > 0


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _numbers(v: object) -> bool:
    return isinstance(v, list) and all(_number(x) for x in v)


def _counts(v: object) -> bool:
    return isinstance(v, list) and all(_count(x) for x in v)


def _text_map(v: object) -> bool:
    return isinstance(v, dict) and all(isinstance(x, (str, int, float)) for x in v.values())


# kind -> (test, what the message calls it)
KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "positive": (_positive, "a finite number > 0"),
    "number": (_number, "a finite number"),
    "count": (_count, "an integer >= 0"),
    "numbers": (_numbers, "a list of finite numbers"),
    "counts": (_counts, "a list of integers >= 0"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "text_map": (_text_map, "an object of strings"),
    "object": (lambda v: isinstance(v, dict), "an object"),
}

# field -> kind: every field that the analyzer, the report or the dashboard reads
FIELDS: dict[str, str] = {
    "tokens_per_step": "positive", "tokens_per_s": "positive", "tokens_per_s_per_gpu": "positive",
    "peak_memory_bytes": "count", "median_step_time_ms": "positive",
    "step_times_ms": "numbers", "timed_steps": "counts", "peak_memory_bytes_by_rank": "counts",
    "nccl_env": "text_map", "regime_env": "text_map", "model": "object", "fusion_by_layer": "object",
    "profiler": "object", "auto": "object",
    "mode": "text", "regime": "text", "dtype": "text", "device": "text", "optimizer": "text",
    "gpu_name": "text", "torch_version": "text", "nccl_version": "text",
    "chunks": "count", "sm_margin": "count", "comm_ctas": "count", "tp": "count", "world_size": "count",
    "gpu_count": "count", "seq_len": "count", "batch": "count", "steps": "count",
    "bwd_overlap": "flag", "embed_overlap": "flag", "ring_all_gather": "flag", "complete": "flag",
    "stopped": "text",
}


def check_manifest(manifest: dict, where: str) -> tuple[dict, list[str]]:
    """(the manifest without its mistyped fields, one warning per field dropped)."""
    clean, warnings = {}, []
    for key, value in manifest.items():
        kind = FIELDS.get(key)
        if kind is None or value is None or KINDS[kind][0](value):
            clean[key] = value
        else:
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            warnings.append(f"{where}: field {key} ignored (must be {KINDS[kind][1]}, not {shown})")
    return clean, warnings
