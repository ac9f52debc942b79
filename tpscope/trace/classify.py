"""Classes of GPU activity (metrics.md §2): one rule table, applied once per distinct name."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np


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
    `substrings` anywhere. A rule with neither matches every name of its kinds.
    """

    cls: ActivityClass
    kinds: tuple[ActivityKind, ...]
    prefixes: tuple[str, ...] = ()
    substrings: tuple[str, ...] = ()

    def matches(self, name_lower: str) -> bool:
        if not self.prefixes and not self.substrings:
            return True
        bare = name_lower[5:] if name_lower.startswith("void ") else name_lower
        return bare.startswith(self.prefixes) or any(s in name_lower for s in self.substrings)


# metrics.md §2, first match wins.
RULES: tuple[Rule, ...] = (
    Rule(
        ActivityClass.COMM,
        (ActivityKind.KERNEL,),
        prefixes=("nccl",),
        substrings=("symmetric_memory", "userbuffers", "nvshmem", "cross_device_reduce", "multimem"),
    ),
    Rule(ActivityClass.COMM, (ActivityKind.MEMCPY,), substrings=("ptop",)),
    Rule(ActivityClass.FILLER, (ActivityKind.KERNEL,), substrings=("spin_kernel",)),
    Rule(ActivityClass.MEMORY, (ActivityKind.MEMCPY, ActivityKind.MEMSET)),
    Rule(ActivityClass.COMPUTE, (ActivityKind.KERNEL,)),
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
    if len(name_ids) == 0:
        return np.zeros(0, dtype=bool)
    uniq, inverse = np.unique(name_ids, return_inverse=True)
    hits = np.fromiter(
        (u >= 0 and any(sub in symbols[u].lower() for sub in SYNC_SUBSTRINGS) for u in uniq.tolist()),
        dtype=bool,
        count=len(uniq),
    )
    return hits[inverse]


def classify_name(name: str, kind: ActivityKind) -> ActivityClass:
    """The class of one activity name of one kind (first matching rule)."""
    lower = name.lower()
    for rule in RULES:
        if kind in rule.kinds and rule.matches(lower):
            return rule.cls
    return ActivityClass.COMPUTE


def classify(name_ids: np.ndarray, kinds: np.ndarray, symbols: list[str]) -> np.ndarray:
    """Class per activity: each distinct (name, kind) pair is classified once, then broadcast."""
    if len(name_ids) == 0:
        return np.zeros(0, dtype=np.int8)
    pair = name_ids.astype(np.int64) * len(ActivityKind) + kinds
    uniq, inverse = np.unique(pair, return_inverse=True)
    classes = np.fromiter(
        (
            classify_name(symbols[int(p) // len(ActivityKind)], ActivityKind(int(p) % len(ActivityKind)))
            for p in uniq
        ),
        dtype=np.int8,
        count=len(uniq),
    )
    return classes[inverse]
