"""What a run's losses say: whether training fell, and whether two runs trained the same model.
Torch-free: the manifest writes these figures and `tpscope report` reads them.

Trend: the mean loss of the first and of the last tenth of the steps (at least one step each;
steps 1-20 and 181-200 of 200, the first and last 5 of 50); the loss fell when the last mean is
below the first and both are finite.

Agreement: two runs of the same seed, model, data and schedule whose fusions differ compute the
same sums in another order, so their per-step losses differ by rounding alone. They agree when
every step's |candidate - baseline| <= rtol * |baseline|, rtol by dtype (LOSS_RTOL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LOSS_RTOL = {"float32": 1e-5, "bfloat16": 2e-2}
"""Per-step relative tolerance of a fused run's loss against unfused's, by dtype. float32: 30x
the largest difference measured over 200 CPU steps (3.3e-7, every CPU mode; tests/fusion/
test_train.py). bfloat16: about 15x the largest measured over 50 CPU steps (1.4e-3, chunked k=4;
docs/runtime.md, "Training"); benchmarks/gpu_training_check.sh measures it at the reference
shape on 2 GPUs."""

SAME_RUN_KEYS = (
    "seed",
    "model",
    "device",
    "dtype",
    "seq_len",
    "batch",
    "steps",
    "lr",
    "warmup_steps",
    "decay_to",
    "grad_clip",
    "weight_decay",
    "tp",
    "optimizer",
    "data",
)
"""Manifest fields that two runs must share for their losses to be compared step by step."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LossTrend:
    """First and last tenth's mean loss of one run."""

    window_steps: int
    first_mean: float
    last_mean: float
    fell: bool


def loss_trend(losses: list[float]) -> LossTrend | None:
    """The trend of a run's per-step losses (None without any)."""
    if not losses:
        return None
    w = max(1, len(losses) // 10)
    first, last = sum(losses[:w]) / w, sum(losses[-w:]) / w
    return LossTrend(
        window_steps=w,
        first_mean=first,
        last_mean=last,
        fell=math.isfinite(first) and math.isfinite(last) and last < first,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class LossAgreement:
    """A candidate's per-step losses against a baseline's."""

    steps: int
    rtol: float
    worst_step: int  # 1-based step of the largest relative difference
    worst_rel: float  # |candidate - baseline| / |baseline| there (inf where not finite)
    first_step: int  # 1-based first step beyond rtol (0: none)
    agree: bool
    baseline_steps: int = 0  # losses each run recorded: a run that recorded fewer does not agree
    candidate_steps: int = 0


def loss_agreement(baseline: list[float], candidate: list[float], rtol: float) -> LossAgreement:
    """Compare the runs step by step over the steps both have (a non-finite loss in either
    disagrees unless both are the same non-finite value); runs that recorded the loss of a
    different number of steps do not agree (one stopped early: its missing steps are unchecked)."""
    n = min(len(baseline), len(candidate))
    rels = []
    for b, c in zip(baseline[:n], candidate[:n]):
        if b == c:
            rels.append(0.0)
        elif math.isfinite(b) and math.isfinite(c):
            rels.append(abs(c - b) / abs(b) if b else math.inf)
        else:
            rels.append(math.inf)
    worst = max(range(n), key=rels.__getitem__) if n else 0
    worst_rel = rels[worst] if n else 0.0
    first = next((i + 1 for i, r in enumerate(rels) if r > rtol), 0)
    return LossAgreement(
        steps=n,
        rtol=rtol,
        worst_step=worst + 1,
        worst_rel=worst_rel,
        first_step=first,
        agree=n > 0 and first == 0 and len(baseline) == len(candidate),
        baseline_steps=len(baseline),
        candidate_steps=len(candidate),
    )
