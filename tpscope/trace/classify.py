"""Classes of GPU activity (metrics.md §2): one rule table, applied once per distinct name."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from tpscope.trace.columns import unique_ids


class ActivityClass(IntEnum):
    """What a GPU activity spends its lane's time on."""

    COMPUTE = 0
    COMM = 1
    MEMORY = 2
    FILLER = 3  # kernels that only wait (torch.cuda._sleep): counted as idle


class ActivityKind(IntEnum):
    """The trace category of a GPU activity."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2


GPU_CATEGORIES: dict[str, ActivityKind] = {
    "kernel": ActivityKind.KERNEL,
    "gpu_memcpy": ActivityKind.MEMCPY,
    "gpu_memset": ActivityKind.MEMSET,
}


@dataclass(frozen=True, slots=True)
class Rule:
    """Names of activities of `kinds` that match any pattern belong to `cls`.

    Patterns are lower-case; `prefixes` match the start of the name (after a leading `void `),
    `substrings` anywhere. A rule with neither matches every name of its kinds. Communication
    rules also name the `library` and the collective kind (`all_gather`, ..., `send_recv`; None
    when the name does not say, e.g. a barrier or a generic kernel).
    """

    cls: ActivityClass
    kinds: tuple[ActivityKind, ...]
    prefixes: tuple[str, ...] = ()
    substrings: tuple[str, ...] = ()
    library: str = ""
    collective: str | None = None

    def matches(self, name_lower: str) -> bool:
        if not self.prefixes and not self.substrings:
            return True
        bare = name_lower[5:] if name_lower.startswith("void ") else name_lower
        return bare.startswith(self.prefixes) or any(s in name_lower for s in self.substrings)


_K = (ActivityKind.KERNEL,)


def _nccl(substring: str, collective: str) -> Rule:
    """An NCCL / RCCL kernel (`ncclDevKernel_*`, `ncclKernel_*`) whose name holds `substring`."""
    return Rule(
        ActivityClass.COMM,
        _K,
        substrings=(f"nccldevkernel_{substring}", f"ncclkernel_{substring}"),
        library="NCCL/RCCL",
        collective=collective,
    )


# metrics.md §2: the communication kernels, first match wins. Names are lower-case.
COMM_KERNELS: tuple[Rule, ...] = (
    _nccl("allgather", "all_gather"),
    _nccl("reducescatter", "reduce_scatter"),
    _nccl("allreduce", "all_reduce"),
    _nccl("alltoall", "all_to_all"),
    _nccl("sendrecv", "send_recv"),
    _nccl("broadcast", "broadcast"),
    _nccl("reduce", "reduce"),
    Rule(ActivityClass.COMM, _K, prefixes=("nccl", "rccl"), library="NCCL/RCCL"),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("multimem_all_reduce", "one_shot_all_reduce", "two_shot_all_reduce"),
        library="torch symmetric memory",
        collective="all_reduce",
    ),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("multimem_all_gather",),
        library="torch symmetric memory",
        collective="all_gather",
    ),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("multimem_reduce_scatter", "two_shot_reduce_scatter"),
        library="torch symmetric memory",
        collective="reduce_scatter",
    ),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("symmetric_memory", "multimem"),
        library="torch symmetric memory",
    ),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("deep_ep::", "internode::", "intranode::", "internode_ll::"),
        library="DeepEP",
        collective="all_to_all",
    ),
    Rule(ActivityClass.COMM, _K, substrings=("nvshmem",), library="NVSHMEM"),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("alltoall", "all_to_all"),
        library="all-to-all",
        collective="all_to_all",
    ),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("cross_device_reduce",),
        library="custom all-reduce",
        collective="all_reduce",
    ),
    Rule(
        ActivityClass.COMM,
        _K,
        substrings=("userbuffers",),
        library="Transformer Engine userbuffers",
    ),
    Rule(
        ActivityClass.COMM,
        (ActivityKind.MEMCPY,),
        substrings=("ptop",),
        library="copy-engine peer copy",
    ),
)

# metrics.md §2 "Copies that carry a transfer": CPU ranges inside which a runtime moves a transfer
# with device <-> host copies (tpscope's host_staged mode stages its pieces through host memory
# that the ranks of a host share). A memcpy launched inside a range whose lower-case name starts
# with the first string and ends with the second is communication, not memory.
TRANSFER_RANGES: tuple[tuple[str, str], ...] = (
    ("tpscope/", "/stage_out"),
    ("tpscope/", "/stage_in"),
)


def is_transfer_range(name_ids: np.ndarray, symbols: tuple[str, ...] | list[str]) -> np.ndarray:
    """Whether each range's name is a TRANSFER_RANGES name; each distinct name is looked at once."""

    def rule(u: int) -> bool:
        lower = symbols[u].lower() if u >= 0 else ""
        return any(lower.startswith(a) and lower.endswith(b) for a, b in TRANSFER_RANGES)

    return _per_distinct(name_ids, rule, bool)


# metrics.md §2, first match wins.
RULES: tuple[Rule, ...] = (
    *COMM_KERNELS,
    Rule(ActivityClass.FILLER, _K, substrings=("spin_kernel",)),
    Rule(ActivityClass.MEMORY, (ActivityKind.MEMCPY, ActivityKind.MEMSET)),
    Rule(ActivityClass.COMPUTE, _K),
)


def comm_rule(name: str, kind: ActivityKind = ActivityKind.KERNEL) -> Rule | None:
    """The COMM_KERNELS row of a communication activity's name (None if it is not one)."""
    lower = name.lower()
    for rule in COMM_KERNELS:
        if kind in rule.kinds and rule.matches(lower):
            return rule
    return None


# metrics.md §9 "Across vendors": the family of a kernel, to compare runs whose kernels have other
# names (cuBLAS `nvjet_*` / `sm90_xmma_gemm_*` against hipBLASLt `Cijk_*`). First match wins, on
# the lower-case name; communication kernels (COMM_KERNELS) are "communication" before these.
KERNEL_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("flash", "attn", "fmha", "attention", "sdpa")),
    (
        "GEMM",
        (
            "gemm",
            "cijk_",
            "nvjet",
            "xmma",
            "cutlass",
            "cublas",
            "matmul",
            "s16816",
            "wgmma",
            "hipblaslt",
        ),
    ),
    ("normalization/reduction", ("norm", "softmax", "reduce_kernel", "reduction")),
    ("copy/index", ("copy", "cat", "index", "gather", "scatter", "fill")),
    ("elementwise", ("elementwise", "functor", "unroll")),
)


def kernel_family(name: str, kind: ActivityKind = ActivityKind.KERNEL) -> str:
    """metrics.md §9: communication, attention, GEMM, ... or "other" (memcpy/memset: "memory")."""
    if comm_rule(name, kind) is not None:
        return "communication"
    if kind != ActivityKind.KERNEL:
        return "memory"
    lower = name.lower()
    return next(
        (family for family, subs in KERNEL_FAMILIES if any(s in lower for s in subs)), "other"
    )


# metrics.md §5: communication kernels that only synchronize ranks (they spin until the peers
# arrive and move no payload); their whole time is wait, not transfer. Lower-case substrings.
SYNC_SUBSTRINGS: tuple[str, ...] = (
    "symmetric_memory::barrier_kernel",
    "symmetric_memory::put_signal_kernel",
    "symmetric_memory::wait_signal_kernel",
)


def is_sync(name_ids: np.ndarray, symbols: tuple[str, ...] | list[str]) -> np.ndarray:
    """Whether each activity's name is a rank-synchronization kernel (SYNC_SUBSTRINGS); each
    distinct name is looked at once."""
    return _per_distinct(
        name_ids,
        lambda u: u >= 0 and any(sub in symbols[u].lower() for sub in SYNC_SUBSTRINGS),
        bool,
    )


def classify_name(name: str, kind: ActivityKind) -> ActivityClass:
    """The class of one activity name of one kind (first matching rule)."""
    lower = name.lower()
    for rule in RULES:
        if kind in rule.kinds and rule.matches(lower):
            return rule.cls
    return ActivityClass.COMPUTE


def classify(name_ids: np.ndarray, kinds: np.ndarray, symbols: list[str]) -> np.ndarray:
    """Class per activity: each distinct (name, kind) pair is classified once, then broadcast."""
    pair = name_ids.astype(np.int64) * len(ActivityKind) + kinds
    return _per_distinct(
        pair,
        lambda p: classify_name(
            symbols[p // len(ActivityKind)], ActivityKind(p % len(ActivityKind))
        ),
        np.int8,
    )


def _per_distinct(keys: np.ndarray, rule, dtype) -> np.ndarray:
    """`rule(key)` for each activity's key, evaluated once per distinct key and broadcast."""
    if len(keys) == 0:
        return np.zeros(0, dtype=dtype)
    uniq, inverse = unique_ids(keys)
    values = np.fromiter((rule(k) for k in uniq.tolist()), dtype=dtype, count=len(uniq))
    return values[inverse]
