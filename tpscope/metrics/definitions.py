"""One line per field of the analyzer's results: what it is, and the docs/metrics.md section that
defines it. The dashboard's column headers show it as their tooltip (`tooltip`)."""

from __future__ import annotations

FIELDS: dict[str, tuple[str, str]] = {
    "run": ("the run folder", "§1"),
    "status": (
        "ok, or how many warnings the loader gave (the page's warnings line lists them)",
        "§1",
    ),
    "mode": ("the overlap mode the run used (from its manifest)", "§9"),
    "regime": (
        "the transport: NVLink, shared memory through the host, gloo (from its manifest)",
        "§9",
    ),
    "ranks": ("how many ranks (GPUs) the run has", "§1"),
    "steps": ("how many profiled steps", "§3"),
    "step": ("the profiled step (ProfilerStep#N)", "§3"),
    "step_time_us": (
        "mean over steps of the slowest rank's step time (µs); the first profiled step left out",
        "§4",
    ),
    "tokens_per_s": ("tokens per second, from the run's timed steps (manifest)", "§9"),
    "peak_memory_gib": ("peak GPU memory of the run (GiB, manifest)", "§9"),
    "exposed_comm_ratio": (
        "communication no compute on the same rank hides, as a share of the step time "
        "(Σ exposed / Σ step time); lower is better",
        "§4",
    ),
    "critical_path_exposed_comm_ratio": (
        "communication on the step's critical path across ranks, as a share of its length: what "
        "hiding communication could save at most; lower is better",
        "§7",
    ),
    "hidden_of_hideable_ratio": (
        "hidden communication / min(communication, compute): the share of the communication that "
        "could hide behind compute and did; higher is better",
        "§4",
    ),
    "overlap_ratio": ("hidden communication / all communication; higher is better", "§4"),
    "contention_slowdown": (
        "how much slower compute kernels run beside communication than alone (time-weighted); "
        "lower is better",
        "§8",
    ),
    "flux_overlap_efficiency": (
        "Flux overlap efficiency against the baseline run: 1 - (T_fused - T_comp) / (T_base - "
        "T_comp); 100% hides all communication, 0% no better than the baseline",
        "§9",
    ),
    "attained_saving": (
        "(T_base - T_fused) / (T_base - max(T_comp, T_comm)): the share of the saving perfect "
        "overlap would give that the run attains",
        "§9",
    ),
    "collective": ("the collective's name", "§5"),
    "key": ("the instance: process group / collective / its number in the group", "§5"),
    "bytes": ("payload bytes (from the message's element count and dtype)", "§5"),
    "skew_us": ("last rank's start - first rank's start (µs)", "§5"),
    "wait_us": ("the longest time a rank's kernel waited for the last rank to arrive (µs)", "§5"),
    "transfer_us": ("from the last arrival until the last rank is done (µs)", "§5"),
    "exposed_us": ("the most kernel time any rank spends with no compute beside it (µs)", "§5"),
    "algbw_gbps": ("bytes / transfer time (GB/s)", "§5"),
    "busbw_gbps": ("algorithm bandwidth × nccl-tests' bus factor (GB/s)", "§5"),
    "group": ("the process group (its ranks and name)", "§5"),
}


def tooltip(field: str) -> str | None:
    """A column header's tooltip: the field's definition and its docs/metrics.md section."""
    entry = FIELDS.get(field)
    return f"{entry[0]} (docs/metrics.md {entry[1]})" if entry else None
