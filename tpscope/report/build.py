"""The report of a candidate run (against a baseline, or alone): one frozen value that every
format (Markdown, JSON, JUnit, HTML) renders. Pure: metrics' results in, report out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tpscope.metrics import RunAnalysis
from tpscope.metrics.across_runs import compare as flux_compare
from tpscope.metrics.across_runs import run_times
from tpscope.metrics.contention_rank import ranked_kernels
from tpscope.metrics.findings import Finding, findings
from tpscope.metrics.kernel_stats import KernelTime
from tpscope.report.collective_table import CollectiveDelta, collective_deltas, collective_stats
from tpscope.report.compare import (
    MIN_SAMPLES,
    FailOn,
    MetricComparison,
    Verdict,
    compare_runs,
    median_difference_ci,
    verdict,
)
from tpscope.report.gemm_contention import GemmView, gemm_view
from tpscope.report.kernel_families import by_family, names_differ
from tpscope.report.loss_check import LossCheck, loss_check, with_loss
from tpscope.report.metric_defs import METRICS
from tpscope.report.step_samples import RunSamples, run_samples
from tpscope.runfolder.manifest import Manifest
from tpscope.runfolder.regimes import RECORDED_PREFIXES, transport_settings

# Manifest fields that describe the experiment; a difference is listed at the top of a report.
# The fusion's settings: they may differ for Flux efficiency to mean something.
FUSION_KEYS = (
    "mode",
    "chunks",
    "sm_margin",
    "comm_ctas",
    "bwd_overlap",
    "embed_overlap",
    "ring_all_gather",
)
CONFIG_KEYS = (
    "regime",
    *FUSION_KEYS,
    "tp",
    "world_size",
    "model",
    "dtype",
    "seq_len",
    "batch",
    "optimizer",
    "gpu_name",
    "gpu_count",
    "torch_version",
    "nccl_version",
)
TOP_N = 8


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a report says about one run folder."""

    run_dir: str
    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    has_manifest: bool
    config: tuple[tuple[str, str], ...]  # (manifest key, value as text) for CONFIG_KEYS it has
    warnings: tuple[str, ...]
    nccl_env: tuple[tuple[str, str], ...] = ()  # the manifest's NCCL settings, logging left out
    cpu_run: bool = False  # analyzed from its CPU side (metrics.md §1, "CPU runs")
    first_step: int | None = None  # the first profiled step: shown, in no median (metrics.md §3)
    first_step_time_us: float | None = None

    @property
    def title(self) -> str:
        c = dict(self.config)
        parts = [c[k] for k in ("regime", "mode") if k in c]
        if c.get("mode") == "chunked" and "chunks" in c:
            parts.append(f"chunks={c['chunks']}")
        return " ".join(parts) or self.run_dir


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """One metric of a run alone: median and range over steps."""

    metric: str
    median: float | None
    low: float | None
    high: float | None
    n: int
    missing: str = ""


@dataclass(frozen=True, slots=True)
class KernelDelta:
    """GPU time per rank and step of one kernel name or collective shape, baseline -> candidate."""

    key: str
    activity_class: str
    baseline_us: float
    candidate_us: float
    delta_us: float
    significant: bool | None  # the bootstrap interval of the per-step difference excludes 0
    kernels: str = ""  # the kernel names of a shape, baseline -> candidate where they differ


@dataclass(frozen=True, slots=True)
class ContendedKernel:
    """A compute-kernel signature of the candidate that runs slower beside communication (§8)."""

    signature: str
    n_overlapped: int
    isolated_median_us: float
    overlapped_median_us: float
    slowdown: float
    tax_us_per_step: float  # n_overlapped x (overlapped - isolated median) / rank-steps


def contended_kernels(analysis: RunAnalysis, top_n: int = 5) -> tuple[ContendedKernel, ...]:
    """The signatures whose slowdown costs the most time per rank and step, most first, above
    the floor of significance (metrics.md §8, "Ranking")."""
    ranked, _under = ranked_kernels(getattr(analysis, "kernel_contention", []), len(analysis.steps))
    return tuple(
        ContendedKernel(
            k.signature,
            k.n_overlapped,
            k.isolated_median_us,
            k.overlapped_median_us,
            k.slowdown,
            k.tax_us_per_step,
        )
        for k in ranked
        if k.tax_us_per_step > 0
    )[:top_n]


@dataclass(frozen=True, slots=True)
class Report:
    candidate: RunInfo
    baseline: RunInfo | None
    fail_on: FailOn
    comparisons: tuple[MetricComparison, ...]  # empty without a baseline
    summaries: tuple[MetricSummary, ...]  # the candidate's own figures
    verdict: Verdict | None  # None without a baseline
    kernels: tuple[KernelDelta, ...]  # regressed most first (alone: most time first)
    collectives: tuple[CollectiveDelta, ...]  # exposed time grew most first (alone: most exposed)
    config_changes: tuple[tuple[str, str, str], ...]  # (key, baseline, candidate)
    step_times_us: tuple[tuple[float, ...], tuple[float, ...]]  # baseline, candidate (for figures)
    breakdown_us: tuple[tuple[tuple[str, float], ...], ...]  # per run: (part, mean µs per step)
    flux_overlap_efficiency: float | None = None  # candidate against the baseline (metrics.md §9)
    attained_saving: float | None = None
    contention: tuple[
        ContendedKernel, ...
    ] = ()  # the candidate's compute slowed most beside comm (§8)
    gemm: GemmView | None = None  # the candidate's GEMM budget, taxed shapes and layers (§8)
    loss: LossCheck | None = None  # the loss curves (None: the candidate records no losses)
    headroom: str | None = None  # the candidate's what-if upper bound (metrics.md §11)
    findings: tuple[Finding, ...] = ()  # the candidate's costs per step, largest first

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict is not None and not self.verdict.passed else 0


def run_info(analysis: RunAnalysis, samples: RunSamples) -> RunInfo:
    m = analysis.manifest or Manifest()
    config = tuple((k, _text(getattr(m, k))) for k in CONFIG_KEYS if getattr(m, k) is not None)
    env = tuple((k, str(v)) for k, v in transport_settings(m.nccl_env or {}).items())
    return RunInfo(
        analysis.run_dir,
        tuple(analysis.ranks),
        samples.steps,
        analysis.manifest is not None,
        config,
        tuple(analysis.warnings),
        env,
        analysis.cpu_run,
        samples.first_step,
        samples.first_step_time_us,
    )


def _text(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def summarize_metric(metric: str, samples: RunSamples) -> MetricSummary:
    v = samples.get(metric)
    if not len(v):
        return MetricSummary(metric, None, None, None, 0, samples.missing.get(metric, ""))
    return MetricSummary(metric, float(np.median(v)), float(v.min()), float(v.max()), len(v))


def _names(names: tuple[str, ...], most: int = 2, width: int = 60) -> str:
    """The first `most` names, each cut at `width` characters, and how many more."""
    cut = [n if len(n) <= width else n[: width - 1] + "…" for n in names[:most]]
    return ", ".join(cut) + (f" (+{len(names) - most})" if len(names) > most else "")


def kernel_deltas(
    baseline: tuple[KernelTime, ...],
    candidate: tuple[KernelTime, ...],
    top_n: int = TOP_N,
    names: tuple[dict, dict] = ({}, {}),
) -> tuple[KernelDelta, ...]:
    """The kernels (or kernel shapes, metrics.md §9) whose time per step grew most; absent ones
    count 0 µs. `names`: per key, the kernel names of the baseline and of the candidate."""
    b = {(k.activity_class, k.key): k for k in baseline}
    c = {(k.activity_class, k.key): k for k in candidate}
    out = []
    for key in b.keys() | c.keys():
        kb, kc = b.get(key), c.get(key)
        bu, cu = (kb.us_per_step if kb else 0.0), (kc.us_per_step if kc else 0.0)
        if cu <= bu:
            continue
        sb = np.asarray(kb.us_by_step if kb else (0.0,) * len(kc.us_by_step))
        sc = np.asarray(kc.us_by_step)
        significant = None
        if min(len(sb), len(sc)) >= MIN_SAMPLES:
            low, high = median_difference_ci(sb, sc)
            significant = low > 0 or high < 0
        nb, nc = _names(names[0].get(key[1], ())), _names(names[1].get(key[1], ()))
        out.append(
            KernelDelta(
                key[1],
                key[0],
                bu,
                cu,
                cu - bu,
                significant,
                nc if nb in ("", nc) else f"{nb or '-'} → {nc or '-'}",
            )
        )
    return tuple(sorted(out, key=lambda d: (-d.delta_us, d.key))[:top_n])


def kernel_totals(
    kernels: tuple[KernelTime, ...], top_n: int = TOP_N, names: dict | None = None
) -> tuple[KernelDelta, ...]:
    """A run alone: its kernels by time per step (as deltas from nothing)."""
    return tuple(
        KernelDelta(
            k.key,
            k.activity_class,
            0.0,
            k.us_per_step,
            k.us_per_step,
            None,
            _names((names or {}).get(k.key, ())),
        )
        for k in kernels[:top_n]
    )


ABSENT_MEANS = {"ring_all_gather": "False"}
"""Manifest fields added later (values as text): a manifest without one ran with this value."""


def config_changes(baseline: RunInfo, candidate: RunInfo) -> tuple[tuple[str, str, str], ...]:
    """(key, baseline, candidate) for each CONFIG_KEYS field that differs, then each NCCL
    variable in force in one run's manifest and not the other's or with another value ("unset"
    where a run with a manifest did not set it). NCCL variables do not make the runs another
    experiment for metrics.md §9: they tune the transport, as the fusion's options do."""
    b = (
        {**ABSENT_MEANS, **dict(baseline.config)}
        if baseline.has_manifest
        else dict(baseline.config)
    )
    c = (
        {**ABSENT_MEANS, **dict(candidate.config)}
        if candidate.has_manifest
        else dict(candidate.config)
    )
    fields = tuple(
        (k, b.get(k, "?"), c.get(k, "?"))
        for k in CONFIG_KEYS
        if (k in b or k in c) and b.get(k) != c.get(k)
    )
    if not (baseline.has_manifest and candidate.has_manifest):
        return fields
    be, ce = dict(baseline.nccl_env), dict(candidate.nccl_env)
    return fields + tuple(
        (k, be.get(k, "unset"), ce.get(k, "unset"))
        for k in sorted({*be, *ce})
        if be.get(k) != ce.get(k)
    )


def breakdown(samples: RunSamples) -> tuple[tuple[str, float], ...]:
    """A step's time split without double counting, mean µs per rank and step (metrics.md §4):
    compute (hidden communication runs under it), exposed communication, memory copies alone, idle."""

    def mean(name: str) -> float:
        v = samples.get(name)
        return float(v.mean()) if len(v) else 0.0

    compute, exposed, idle = mean("compute_us"), mean("exposed_comm_us"), mean("idle_us")
    memory_alone = max(mean("rank_step_time_us") - compute - exposed - idle, 0.0)
    return (
        ("compute", compute),
        ("exposed comm", exposed),
        ("memory alone", memory_alone),
        ("idle", idle),
        ("hidden comm (under compute)", mean("hidden_comm_us")),
    )


@dataclass(frozen=True, slots=True)
class RunResults:
    """What the metrics stage gives a report about one run."""

    analysis: RunAnalysis
    kernels: tuple[KernelTime, ...]  # kernel_times(run, "shape") (or "name")
    collective_kernels: tuple[
        KernelTime, ...
    ] = ()  # by_collective(kernel_times(run, "collective"))
    # per kernels' key: kernel names (kernel_stats.kernel_names)
    kernel_names: dict = field(default_factory=dict)


def run_findings(analysis) -> tuple[Finding, ...]:
    """The run's findings (tpscope.metrics.findings), from its JSON document as `analyze` gives it."""
    from tpscope.metrics import as_json

    return tuple(findings(as_json(analysis)))


def build_report(
    candidate: RunResults,
    fail_on: FailOn,
    baseline: RunResults | None = None,
    loss_rtol: float | None = None,
) -> Report:
    """Compare `candidate` with `baseline` (or describe it alone). `loss_rtol`: the loss curves'
    tolerance (None: by dtype; negative: not compared; tpscope.report.loss_check)."""
    losses = loss_check(
        baseline.analysis.manifest if baseline else None, candidate.analysis.manifest, loss_rtol
    )
    cs = run_samples(candidate.analysis)
    cinfo = run_info(candidate.analysis, cs)
    summaries = tuple(
        summarize_metric(m.name, cs)
        for m in METRICS
        if len(cs.get(m.name)) or fail_on.get(m.name) or fail_on.bound(m.name)
    )
    c_coll = collective_stats(candidate.analysis, candidate.collective_kernels)
    if baseline is None:
        return Report(
            cinfo,
            None,
            fail_on,
            (),
            summaries,
            None,
            kernel_totals(candidate.kernels, names=candidate.kernel_names),
            collective_deltas((), c_coll),
            (),
            ((), tuple(cs.get("step_time_us").tolist())),
            (breakdown(cs),),
            contention=contended_kernels(candidate.analysis),
            gemm=gemm_view(candidate.analysis),
            loss=losses,
            findings=run_findings(candidate.analysis),
        )
    bs = run_samples(baseline.analysis)
    binfo = run_info(baseline.analysis, bs)
    comparisons = compare_runs(bs, cs, fail_on)
    b_an, c_an = baseline.analysis, candidate.analysis
    changes = config_changes(binfo, cinfo)
    flux = saving = None
    kb, kc = baseline.kernels, candidate.kernels
    kernel_names = (baseline.kernel_names, candidate.kernel_names)
    if names_differ(kb, kc):  # metrics.md §9: another vendor's kernels, compared by family
        kb, kc, kernel_names = by_family(kb), by_family(kc), ({}, {})
    # §9: one experiment
    if all(k in FUSION_KEYS or k.startswith(RECORDED_PREFIXES) for k, _, _ in changes):
        flux, saving = flux_compare(run_times(*_steady(c_an)), run_times(*_steady(b_an)))
    return Report(
        candidate=cinfo,
        baseline=binfo,
        fail_on=fail_on,
        comparisons=comparisons,
        summaries=summaries,
        verdict=with_loss(verdict(comparisons), losses),
        kernels=kernel_deltas(kb, kc, names=kernel_names),
        collectives=collective_deltas(collective_stats(b_an, baseline.collective_kernels), c_coll),
        config_changes=changes,
        step_times_us=(
            tuple(bs.get("step_time_us").tolist()),
            tuple(cs.get("step_time_us").tolist()),
        ),
        breakdown_us=(breakdown(bs), breakdown(cs)),
        flux_overlap_efficiency=flux,
        attained_saving=saving,
        contention=contended_kernels(c_an),
        gemm=gemm_view(c_an),
        loss=losses,
        findings=run_findings(c_an),
    )


def _steady(analysis) -> tuple[list, list]:
    """The critical paths and per-rank steps of a run without its first profiled step (metrics.md §3)."""
    return (
        [p for p in analysis.critical_path if not p.first_step],
        [s for s in analysis.steps if not s.first_step],
    )
