"""One entry point over a loaded run: every metric, as small frozen dataclasses (the JSON of
`tpscope analyze --json`, docs/metrics.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tpscope import __version__
from tpscope.jsonable import encoded, plain
from tpscope.metrics import across_runs
from tpscope.metrics.activities import RunActivities, exposed_ns, run_activities
from tpscope.metrics.breakdown import (
    StepBreakdown,
    class_sets,
    rank_breakdown,
    wait_transfer_by_step,
)
from tpscope.metrics.clocks import ClockOffsets, clock_offsets
from tpscope.metrics.collectives import (
    CollectiveInstance,
    CollectiveMatch,
    CollectiveTiming,
    collective_instances,
    collective_timing,
    match_collectives,
)
from tpscope.metrics.contention import (
    CommContention,
    GemmBudget,
    GemmContention,
    KernelContention,
    TaxPart,
    comm_overlap_fraction,
    contention,
    isolated_baselines,
    reference_gemm_samples,
)
from tpscope.metrics.critical_path import CriticalPath, CriticalPaths, path_graph
from tpscope.metrics.gemm import GemmFinder, Gemms, Samples
from tpscope.metrics.intervals import IntervalSet
from tpscope.runfolder.manifest import Manifest
from tpscope.trace import RankTrace, Run
from tpscope.trace.beside import threads_for


@dataclass(frozen=True, slots=True)
class Summary:
    """Whole-run figures (metrics.md §4, "Summary over a run")."""

    step_time_us: float | None
    exposed_comm_ratio: float | None
    overlap_ratio: float | None
    hidden_of_hideable_ratio: float | None
    critical_path_exposed_comm_ratio: float | None = None
    contention_slowdown: float | None = None
    contention_coverage: float | None = None
    tokens_per_s: float | None = None
    flux_overlap_efficiency: float | None = None
    attained_saving: float | None = None


@dataclass(frozen=True, slots=True)
class RunAnalysis:
    """Everything `tpscope analyze` reports about one run."""

    run_dir: str
    ranks: list[int]
    warnings: list[str]
    steps: list[StepBreakdown]
    summary: Summary
    critical_path: list[CriticalPath] = field(default_factory=list)
    collectives: list[CollectiveInstance] = field(default_factory=list)
    clock_offsets_us: dict[int, float] = field(default_factory=dict)
    clock_residual_us: dict[int, float | None] = field(default_factory=dict)  # metrics.md §6
    kernel_contention: list[KernelContention] = field(default_factory=list)
    comm_contention: list[CommContention] = field(default_factory=list)
    gemm_contention: list[GemmContention] = field(default_factory=list)
    gemm_budget: GemmBudget | None = None
    contention_by_layer: list[TaxPart] = field(default_factory=list)
    contention_by_kernel: list[TaxPart] = field(default_factory=list)
    manifest: Manifest | None = None
    cpu_run: bool = (
        False  # every rank without GPU activity, analyzed from its CPU side (metrics.md §1)
    )
    # per rank: the §3 rule its steps came from
    step_rule: dict[int, str] = field(default_factory=dict)
    first_step_included: bool = False  # whether the summary's means hold the first profiled step


def _sum(steps: list[StepBreakdown], attr: str) -> float:
    return float(sum(getattr(s, attr) for s in steps))


def summarize(steps: list[StepBreakdown], manifest: Manifest | None) -> Summary:
    """Ratios of sums over every rank and step, so long steps weigh more (metrics.md §4)."""
    if not steps:
        return Summary(None, None, None, None, tokens_per_s=_tokens_per_s(manifest))
    by_step: dict[int, float] = {}
    for s in steps:
        by_step[s.step] = max(by_step.get(s.step, 0.0), s.step_time_us)
    step_time = _sum(steps, "step_time_us")
    comm = _sum(steps, "comm_us")
    hidden = _sum(steps, "hidden_comm_us")
    hideable = float(sum(min(s.comm_us, s.compute_us) for s in steps))
    return Summary(
        step_time_us=float(np.mean(list(by_step.values()))),
        exposed_comm_ratio=_sum(steps, "exposed_comm_us") / step_time if step_time > 0 else None,
        overlap_ratio=hidden / comm if comm > 0 else None,
        hidden_of_hideable_ratio=hidden / hideable if hideable > 0 else None,
        tokens_per_s=_tokens_per_s(manifest),
    )


def _tokens_per_s(manifest: Manifest | None) -> float | None:
    """metrics.md §9: throughput comes from the run manifest, never from a trace."""
    value = manifest.tokens_per_s if manifest is not None else None
    return float(value) if value is not None else None


def analyze_run(
    run: Run,
    reference: Run | None = None,
    align: str = "auto",
    include_first_step: bool = False,
    calibration: Samples | None = None,
    workers: int = 1,
) -> RunAnalysis:
    """Every metric of `run` (metrics.md §4-§9); `reference`, an unfused run, supplies isolated
    kernel baselines (§8) and the baseline of Flux overlap efficiency and attained saving (§9);
    `calibration` (from `tpscope calibrate`) isolated GEMM times by shape and SM margin (§8).
    `workers`: processes the critical paths of a big run's steps may be walked in (§7).

    The first profiled step (the lowest step number, when there are several) is marked and left
    out of the summary's means unless `include_first_step` (§3)."""
    compute: list[IntervalSet] = []  # per rank: the union of its compute (metrics.md §4)
    steps: list[StepBreakdown] = []
    gemms = GemmFinder()

    def per_rank(_pos: int, rank: RankTrace, first_row: int) -> None:  # in the one pass
        rank_sets = class_sets(rank)
        compute.append(rank_sets.compute)
        steps.extend(rank_breakdown(rank, rank_sets))
        gemms.add(rank, first_row)

    acts = run_activities(run, per_rank)
    numbers = sorted({s.step for s in steps})
    first = numbers[0] if len(numbers) > 1 else None
    cross = _cross_rank(run, acts, compute, gemms.finish(), reference, align, calibration, workers)
    steps = [_fill_step(s, cross, s.step == first) for s in steps]
    steady = [s for s in steps if include_first_step or not s.first_step]
    summary = summarize(steady, run.manifest)
    paths = cross["paths"]
    steady_paths = [p for p in paths if include_first_step or not p.first_step]
    length = sum(p.length_us for p in steady_paths)
    summary = dataclasses.replace(
        summary,
        critical_path_exposed_comm_ratio=sum(p.comm_us for p in steady_paths) / length
        if length > 0
        else None,
        contention_slowdown=cross["contention"].slowdown,
        contention_coverage=cross["contention"].coverage,
    )
    warnings = list(run.warnings) + cross["warnings"]
    if reference is not None:
        ref = analyze_run(reference, align=align, workers=workers)
        flux, saving = across_runs.compare(
            across_runs.run_times(steady_paths, steady),
            across_runs.run_times(  # §9: the reference's steps chosen as the run's
                [p for p in ref.critical_path if include_first_step or not p.first_step],
                [s for s in ref.steps if include_first_step or not s.first_step],
            ),
        )
        summary = dataclasses.replace(summary, flux_overlap_efficiency=flux, attained_saving=saving)
        warnings += [f"reference {reference.path}: {w}" for w in ref.warnings]
    return RunAnalysis(
        run_dir=str(run.path),
        ranks=run.rank_ids,
        warnings=warnings,
        steps=steps,
        summary=summary,
        critical_path=paths,
        collectives=cross["collectives"],
        clock_offsets_us=cross["offsets_us"],
        clock_residual_us=cross["residual_us"],
        kernel_contention=cross["contention"].kernels,
        comm_contention=cross["contention"].collectives,
        gemm_contention=cross["contention"].gemms or [],
        gemm_budget=cross["contention"].budget,
        contention_by_layer=cross["contention"].by_layer or [],
        contention_by_kernel=cross["contention"].by_kernel or [],
        manifest=run.manifest,
        cpu_run=bool(run.ranks) and all(h.cpu_run for h in run.ranks.headers),
        step_rule={h.rank: h.steps.source for h in run.ranks.headers},
        first_step_included=include_first_step,
    )


def _cross_rank(
    run: Run,
    acts: RunActivities,
    compute: list[IntervalSet],
    gemms: Gemms,
    reference: Run | None,
    align: str,
    calibration: Samples | None = None,
    workers: int = 1,
) -> dict:
    """§5-§8 over all ranks at once: matching, clocks, wait/transfer, critical path, contention."""
    match = match_collectives(acts)
    clocks = clock_offsets(acts, match, align)
    timing = collective_timing(acts, match, clocks.offsets_ns)
    graph = path_graph(acts, match, timing, clocks.offsets_ns, run.ranks, threads_for(workers))
    # the steps' walks begin here (in forked workers on many cores) while the rest is computed
    with CriticalPaths(acts, graph, [h.steps for h in run.ranks.headers], workers) as paths:
        return _besides_paths(
            run, acts, compute, gemms, reference, calibration, match, clocks, timing, paths
        )


def _besides_paths(
    run: Run,
    acts: RunActivities,
    compute: list[IntervalSet],
    gemms: Gemms,
    reference: Run | None,
    calibration: Samples | None,
    match: CollectiveMatch,
    clocks: ClockOffsets,
    timing: CollectiveTiming,
    paths: CriticalPaths,
) -> dict:
    """`_cross_rank`'s metrics other than the critical path (§5, §6, §8), then the paths."""
    baselines, ref_samples, ref_gemm_us = None, {}, None
    if reference is not None:
        ref_gemms = GemmFinder()  # found in the pass that reads each reference rank once
        ref_acts = run_activities(reference, lambda _pos, r, first: ref_gemms.add(r, first))
        ref_f = comm_overlap_fraction(ref_acts)
        baselines = isolated_baselines(ref_acts, ref_f)
        ref_samples, ref_gemm_us = reference_gemm_samples(ref_gemms.finish(), ref_acts, ref_f)
    found = contention(
        gemms,
        acts,
        match,
        timing,
        compute,
        baselines,
        [ref_samples, calibration or {}],
        _sm_margin(run.manifest),
    )
    if found.budget is not None and ref_gemm_us is not None:
        found = dataclasses.replace(
            found, budget=dataclasses.replace(found.budget, reference_gemm_us=ref_gemm_us)
        )
    return {
        "wait_transfer": wait_transfer_by_step(
            acts, timing.wait_ns, [h.steps for h in run.ranks.headers]
        ),
        "collectives": collective_instances(acts, match, timing, exposed_ns(acts, compute)),
        "offsets_us": clocks.as_us(acts.rank_ids),
        "residual_us": clocks.residual_us(acts.rank_ids),
        "paths": paths.results(),
        "contention": found,
        "warnings": list(match.warnings) + list(clocks.warnings),
    }


def _sm_margin(manifest: Manifest | None) -> int | None:
    """The SM margin the run's fused GEMMs left free, when the manifest names exactly one (§8)."""
    if manifest is None:
        return None
    layers = manifest.fusion_by_layer or {}
    margins = {v.get("sm_margin") for v in layers.values() if isinstance(v, dict)} or {
        manifest.sm_margin
    }
    margins = {m for m in margins if isinstance(m, int) and m > 0}
    return margins.pop() if len(margins) == 1 else None


def _fill_step(s: StepBreakdown, cross: dict, first_step: bool) -> StepBreakdown:
    """The §5 and §8 fields of one rank's step: wait and transfer are 0 without comm; the
    contention fields stay None without an overlapped kernel that has a baseline."""
    wait, transfer = cross["wait_transfer"].get((s.rank, s.step), (0.0, 0.0))
    tax, base = cross["contention"].by_step.get((s.rank, s.step), (None, None))
    return dataclasses.replace(
        s,
        comm_wait_us=wait,
        comm_transfer_us=transfer,
        contention_tax_us=tax,
        contention_slowdown=tax / base if tax is not None and base else None,
        first_step=first_step,
    )


def as_json(analysis: RunAnalysis) -> dict:
    """The JSON document of `tpscope analyze --json` as plain values (metrics.md §10)."""
    return {k: plain(v) for k, v in json_fields(analysis).items()}


def json_fields(analysis: RunAnalysis) -> dict:
    """The top level of `as_json`, its values still dataclasses and numpy scalars (for
    `tpscope.jsonable.dumps`, which writes them by the same rule without the Python walk)."""
    doc = {"tpscope_version": __version__}
    for f in dataclasses.fields(analysis):
        if f.name != "manifest":
            doc[f.name] = getattr(analysis, f.name)
    doc["critical_path"] = [  # segments written by a worker process: their text as it wrote it
        dataclasses.replace(p, segments=encoded(p.segments)) for p in analysis.critical_path
    ]
    return doc
