"""`tpscope whatif`'s computation: one run's replay graph, the identity, and one prediction per
change plus all of them together (metrics.md §11)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.metrics.activities import NS_PER_US, run_activities
from tpscope.metrics.clocks import clock_offsets
from tpscope.metrics.collectives import collective_timing, match_collectives
from tpscope.metrics.contention import comm_overlap_fraction
from tpscope.metrics.critical_path import PathGraph, critical_paths, path_graph
from tpscope.metrics.gemm import GemmFinder, Samples
from tpscope.metrics.replay import replay_graph, simulate
from tpscope.metrics.replay_measures import (
    carried_by_kind,
    carried_by_name,
    median_latencies,
    step_times,
)
from tpscope.metrics.whatif_changes import (
    ASSUMED_SLOWDOWN,
    KINDS,
    AlphaBeta,
    Change,
    ChangeError,
    Durations,
    apply_comm,
    apply_contention_off,
    apply_link,
    comm_table,
    fit_alpha_beta,
    gemm_baselines_ns,
    run_samples,
    select_rows,
)
from tpscope.metrics.whatif_contention import (
    BESIDE_WORDS,
    COLL,
    P2P,
    ContentionSource,
    contention_source,
    measured_contention,
    transfer_kind,
)
from tpscope.metrics.whatif_fuse import (
    AG,
    RS,
    GemmTimes,
    PipelineModel,
    apply_fuse,
    find_pairs,
    is_sm_mode,
    no_pair_reason,
    overridden,
    pair_names,
    selected_pairs,
)
from tpscope.trace import ActivityClass, Run


@dataclass
class Inputs:
    """A loaded run as the replay needs it."""

    run: Run
    acts: object
    match: object
    timing: object
    offsets_ns: np.ndarray
    graph: PathGraph
    rg: object
    comm: object
    fits: dict
    gemms: object
    overlap_f: np.ndarray
    samples: Samples
    pairs: object = None


def prepare(run: Run, align: str = "auto") -> Inputs:
    finder = GemmFinder()
    acts = run_activities(run, lambda _pos, r, first: finder.add(r, first))
    gemms = finder.finish()
    match = match_collectives(acts)
    clocks = clock_offsets(acts, match, align)
    timing = collective_timing(acts, match, clocks.offsets_ns)
    graph = path_graph(acts, match, timing, clocks.offsets_ns, run.ranks)
    rg = replay_graph(acts, match, timing, graph)
    comm = comm_table(acts, match)
    fits = fit_alpha_beta(comm, np.asarray(timing.transfer_span_ns))
    f = comm_overlap_fraction(acts)
    samples = run_samples(gemms, acts.end_ns - acts.start_ns, f)
    inp = Inputs(
        run, acts, match, timing, clocks.offsets_ns, graph, rg, comm, fits, gemms, f, samples
    )
    inp.pairs = find_pairs(acts, comm, gemms, rg)
    return inp


@dataclass(frozen=True, slots=True)
class Prediction:
    change: str
    predicted_step_us: float | None
    step_us: list[float]
    speedup: float | None  # measured / predicted
    tokens_per_s: float | None
    exposed_comm_us: float | None  # per step, the most of any rank
    path: dict | None  # the critical path's composition (µs per step, mean)
    notes: list[str] = field(default_factory=list)
    fused: dict = field(default_factory=dict)  # fuse=: per change, per pair kind, its pipelines


@dataclass(frozen=True, slots=True)
class WhatIf:
    run_dir: str
    steps: list[int]
    measured_step_us: float | None
    measured_steps_us: list[float]
    replayed_step_us: float | None
    replayed_steps_us: list[float]
    identity_error: float | None  # (replayed - measured) / measured of the mean
    identity_max_step_error: float | None
    # the identity with each edge kind's median latency per rank instead of each activity's own
    median_latency_error: float | None
    inferred_us_per_step: dict  # per rank and step: time inferred or unexplained edges carried
    inferred_top: dict  # per edge kind: [(activity or call name, µs per rank and step)], largest
    out_of_order: int
    replay_ms: float
    tokens_per_s: float | None
    measured_exposed_comm_us: float | None  # as Prediction.exposed_comm_us, on the measured times
    alpha_beta: list[AlphaBeta]
    pairs: list[str]
    contention: dict | None
    measured_path: dict | None
    changes: list[Prediction]


def _mean(x: list[float]) -> float | None:
    vals = x[1:] if len(x) > 1 else x  # §3: the first profiled step left out
    return float(np.mean(vals)) if vals else None


def _exposed_us(inp: Inputs, st: np.ndarray, en: np.ndarray) -> float | None:
    """Per step, the most time of any rank during which its communication ran and none of its
    compute did (the union of its comm activities less the union of its compute: comm on several
    streams or threads at once, or a CPU op nested in another, counted once), mean over steps."""
    acts = inp.acts
    is_comm = acts.cls == ActivityClass.COMM
    is_comp = acts.cls == ActivityClass.COMPUTE
    per: dict[int, float] = {}
    for pos in range(len(acts.rank_ids)):  # a loop over ranks
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        s, e, stp = st[lo:hi], en[lo:hi], acts.step[lo:hi]
        cover = iv.union(s[is_comp[lo:hi]], e[is_comp[lo:hi]])
        c = np.flatnonzero(is_comm[lo:hi] & (stp >= 0))
        for k in np.unique(stp[c]).tolist():  # a loop over steps
            mine = c[stp[c] == k]
            comm = iv.union(s[mine], e[mine])
            v = (iv.total(comm) - iv.total(iv.intersection(comm, cover))) / NS_PER_US
            per[k] = max(per.get(k, 0.0), float(v))
    return _mean([per[k] for k in sorted(per)]) if per else None


class _Replayed(PathGraph):
    """The §7 graph with replayed times, so that the critical path of a prediction is walked by
    the same rules as the measured one."""

    def __init__(self, base: PathGraph, r, arrival, binding, cpu_base):
        self.__dict__.update(base.__dict__)
        self._base, self._r, self._cpu_base = base, r, cpu_base
        self.arrival_ns, self.binding = arrival.tolist(), binding.tolist()
        self._cache = {}

    def rank(self, pos):
        if pos not in self._cache:
            g, r = self._base.rank(pos), self._r
            lo, hi = g.base, g.base + len(g.start_ns)
            c0 = int(self._cpu_base[pos])
            c1 = c0 + len(g.cpu.start_ns)
            call = np.asarray(g.launch_call, np.int64)
            le = np.asarray(g.launch_end_ns, np.int64)
            known = (call >= 0) & (le != np.iinfo(np.int64).min)
            le = np.where(known, r.cpu_end_ns[c0:c1][np.maximum(call, 0)] if c1 > c0 else le, le)
            cpu = dataclasses.replace(
                g.cpu, start_ns=r.cpu_start_ns[c0:c1], end_ns=r.cpu_end_ns[c0:c1]
            )
            self._cache[pos] = dataclasses.replace(
                g,
                start_ns=r.start_ns[lo:hi].tolist(),
                end_ns=r.end_ns[lo:hi].tolist(),
                launch_end_ns=le.tolist(),
                cpu=cpu,
            )
        return self._cache[pos]


def _path(inp: Inputs, r) -> dict | None:
    """Mean per steady step of the critical path's compute/comm/memory/host/idle µs."""
    acts, rg = inp.acts, inp.rg
    st, en, arrival = r.start_ns, r.end_ns, r.arrival_ns
    binding = np.full(rg.n_instances, -1, np.int64)
    mem = np.flatnonzero(rg.instance >= 0)
    if len(mem):
        order = np.lexsort((st[mem], rg.instance[mem]))
        last = np.append(rg.instance[mem][order][1:] != rg.instance[mem][order][:-1], True)
        binding[rg.instance[mem][order][last]] = mem[order][last]
    shift = inp.offsets_ns[acts.rank_pos]
    acts2 = dataclasses.replace(acts, start_ns=st + shift, end_ns=en + shift)
    try:
        paths = critical_paths(acts2, _Replayed(inp.graph, r, arrival, binding, rg.cpu_base))
    except Exception:  # noqa: BLE001 - a composition the walk cannot give is left out, not guessed
        return None
    steady = [p for p in paths if not p.first_step] or paths
    if not steady:
        return None
    keys = ("length_us", "compute_us", "comm_us", "memory_us", "host_us", "idle_us")
    return {k: float(np.mean([getattr(p, k) for p in steady])) for k in keys}


def predict(
    inp: Inputs,
    changes: list[Change],
    contention: ContentionSource | None = None,
    calibration: Samples | None = None,
    extra_samples: Samples | None = None,
    tokens_per_s: float | None = None,
) -> WhatIf:
    """The identity and one Prediction per change, then all together when there are several."""
    import time

    rg = inp.rg
    t0 = time.perf_counter()
    ident = simulate(rg)
    replay_ms = (time.perf_counter() - t0) * 1000
    meas = step_times(rg, rg.start_ns, rg.end_ns)
    rep = step_times(rg, ident.start_ns, ident.end_ns)
    m_mean, r_mean = _mean(meas.step_us), _mean(rep.step_us)
    errs = [abs(b - a) / a for a, b in zip(meas.step_us, rep.step_us) if a > 0]
    med = simulate(median_latencies(rg))
    med_steps = step_times(rg, med.start_ns, med.end_ns).step_us
    med_mean = _mean(med_steps)
    carried = carried_by_kind(rg)
    pools = [inp.samples, extra_samples or {}, calibration or {}]
    base_ns = gemm_baselines_ns(inp.gemms, pools)
    times = GemmTimes(pools)
    rows = [(c.text, [c]) for c in changes]
    if len(changes) > 1:
        rows.append((" ".join(c.text for c in changes), changes))
    preds = []
    for text, group in rows:
        d = Durations(rg.dur_ns.copy(), rg.transfer_ns.copy(), [])
        links = _links(group)
        # transfers first, then contention, then fuse (whose pairs' transfers it replaces);
        # a pair selected by several fuse= gets the last one's pipeline only
        fuses = [c for c in group if c.kind == "fuse"]
        taken = {  # per fuse= (by position: the same text may be typed twice)
            id(c): np.logical_or.reduce([selected_pairs(inp.pairs, x.target) for x in later])
            for i, c in enumerate(fuses)
            if (later := fuses[i + 1 :])
        }
        for c in sorted(group, key=lambda c: ORDER.index(c.kind)):
            _apply(inp, d, c, contention, base_ns, times, links, taken.get(id(c)))
        d.notes.extend(overridden(inp.pairs, [(c.text, c.target) for c in fuses]))
        r = simulate(rg, d.dur_ns, d.transfer_ns)
        st = step_times(rg, r.start_ns, r.end_ns)
        mean = _mean(st.step_us)
        preds.append(
            Prediction(
                change=text,
                predicted_step_us=mean,
                step_us=st.step_us,
                speedup=m_mean / mean if m_mean and mean else None,
                tokens_per_s=tokens_per_s * m_mean / mean
                if tokens_per_s and m_mean and mean
                else None,
                exposed_comm_us=_exposed_us(inp, r.start_ns, r.end_ns),
                path=_path(inp, r),
                notes=d.notes,
                fused=d.fused,
            )
        )
    return WhatIf(
        run_dir=str(inp.run.path),
        steps=meas.steps,
        measured_step_us=m_mean,
        measured_steps_us=meas.step_us,
        replayed_step_us=r_mean,
        replayed_steps_us=rep.step_us,
        identity_error=(r_mean - m_mean) / m_mean if m_mean else None,
        identity_max_step_error=max(errs) if errs else None,
        median_latency_error=(med_mean - m_mean) / m_mean if m_mean and med_mean else None,
        inferred_us_per_step=carried,
        inferred_top=carried_by_name(rg, *_names(inp)),
        out_of_order=ident.out_of_order,
        replay_ms=replay_ms,
        tokens_per_s=tokens_per_s,
        measured_exposed_comm_us=_exposed_us(inp, inp.acts.start_ns, inp.acts.end_ns),
        alpha_beta=list(inp.fits.values()),
        pairs=pair_names(inp.pairs, inp.gemms),
        contention=(
            {
                "slowdown": contention.slowdown,
                "source": contention.source,
                "transfers": contention.transfers,
                "slowdown_by_beside": contention.by_beside,
            }
            if contention
            else None
        ),
        measured_path=_path(inp, ident),
        changes=preds,
    )


def _names(inp: Inputs) -> tuple[np.ndarray, np.ndarray]:
    """Per activity its name; per runtime call (the replay's order) the CPU op that made it."""
    acts = inp.acts
    strings = np.array(acts.strings + ("",), dtype=object)
    names = strings[np.where(acts.name >= 0, acts.name, len(acts.strings))]
    cpu = []
    for pos in range(len(inp.rg.cpu_base)):  # a loop over ranks
        c = inp.graph.rank(pos).cpu
        own = np.array(c.strings + ("",), dtype=object)
        cpu.append(own[np.where(c.op >= 0, c.op, len(c.strings))])
    return names, np.concatenate(cpu) if cpu else np.zeros(0, object)


ORDER = ("link", "comm", "hide", "contention", "fuse")  # comm= and hide= scale what link= gives


def _links(group: list[Change]) -> dict:
    """The link= changes of one row that time a whole kind (untargeted: "*"), by kind."""
    out = {}
    for c in group:
        if c.kind != "link":
            continue
        parts = c.target.split(",") if c.target else ["*"]
        for k in parts:
            if k == "*" or k in KINDS:
                out[k] = (c.gbps, c.lat_us)
    return out


def _apply(
    inp: Inputs,
    d: Durations,
    c: Change,
    contention,
    base_ns: np.ndarray,
    times,
    links: dict | None = None,
    taken: np.ndarray | None = None,  # fuse=: pairs a later fuse= of the row fuses instead
) -> None:
    rg = inp.rg
    if c.kind in ("comm", "hide", "link"):
        sel = select_rows(inp.comm, rg.is_comm, c.target, c.text)
        if c.kind == "comm":
            apply_comm(d, rg, sel, c.factor)
        elif c.kind == "hide":
            apply_comm(d, rg, sel, 0.0)
        else:
            apply_link(d, rg, inp.comm, sel, c.gbps, c.lat_us, inp.fits)
        return
    if c.kind == "contention":
        n, removed = apply_contention_off(d, inp.gemms, inp.overlap_f, base_ns)
        d.notes.append(
            f"{n} overlapped GEMM kernels at their isolated time ({removed:.0f} µs less)"
        )
        return
    pairs = inp.pairs
    keep = selected_pairs(inp.pairs, c.target)
    if not keep.any():
        raise ChangeError(
            f"CHANGE {c.text!r}: {no_pair_reason(inp.pairs, inp.run.manifest, c.target)}"
        )
    if taken is not None:
        keep &= ~taken
        if not keep.any():
            return
    pairs = type(pairs)(*(getattr(pairs, f)[keep] for f in pairs.__dataclass_fields__))
    sm = is_sm_mode(c.mode)
    kind = "sm" if sm else "copy"
    same = contention is not None and contention.transfers == kind
    beside = P2P if c.mode == "ring" else COLL  # a ring's pieces are send/recv
    by_shape = {}
    if same and beside in contention.by_beside:
        slow = contention.by_beside[beside]
        source = f"measured on {contention.source} ({BESIDE_WORDS[beside]})"
        by_shape = {s: v for (s, b), v in contention.by_shape.items() if b == beside}
    else:
        slow = ASSUMED_SLOWDOWN[kind]
        source = "assumed" + (
            f" (the --contention-from run has no GEMM {BESIDE_WORDS[beside]})"
            if same
            else f" (the --contention-from run's transfers are not {'SM' if sm else 'copy-engine'} transfers)"
            if contention is not None
            else " (no --contention-from run)"
        )
    fits = dict(inp.fits)
    if same and contention.fits:
        # chunk transfers timed by the fused run's own α-β fit: measured beside GEMMs
        fits.update(contention.fits)
        source += "; chunk transfers by its α-β fit"
    beta = {k: f.beta_gbps for k, f in fits.items()}
    alpha = {k: f.alpha_us for k, f in fits.items()}
    for kind_, (gbps, lat_us) in links.items():  # a link= of the same call times the pieces too
        for k in [kind_] if kind_ != "*" else list(beta) or ["all_gather", "reduce_scatter"]:
            beta[k] = gbps
            alpha[k] = lat_us if lat_us is not None else alpha.get(k, 0.0)
    if links:
        source += "; chunk transfers by the link= of this row"
    model = PipelineModel(
        mode=c.mode,
        chunks=c.chunks,
        slowdown=slow,
        slowdown_source=source,
        beta_gbps=beta,
        alpha_us=alpha,
        bwd_overlap=c.bwd_overlap,
        slowdown_by_shape=by_shape,
    )
    used = apply_fuse(
        d, rg, pairs, model, np.asarray(inp.match.group_size), inp.comm, times, inp.gemms
    )
    d.fused[c.text] = used
    for k, v in used.items():
        if k in (AG, RS) and v["pairs"]:
            d.notes.append(
                f"{k}: {v['pairs']} pairs, {v['pieces']} pieces; transfer {v['transfer_us']:.0f} µs, "
                f"GEMM {v['gemm_us']:.0f} µs -> pipeline {v['pipeline_us']:.0f} µs"
            )
    if used["wgrad_beside"]:
        d.notes.append(
            f"{used['wgrad_beside']} backward weight gradients beside their pairs' transfers "
            f"({c.mode}'s backward overlap)"
        )
    d.notes.append(f"contention slowdown {slow:.1%}: {source}")
    if c.mode in ("copy_engine", "host_staged") and not links:
        d.notes.append(
            f"{c.mode} transfers at the fitted bandwidth of this run's collectives (assumed: its "
            "own path is not in this trace; link=GBPS,LAT_US@KIND in the same row sets it)"
        )
    d.notes.append(
        "GEMM pieces: "
        + ", ".join(f"{r} x{k}" for k, r in sorted((v, r) for r, v in times.rules.items()))
    )
    times.rules.clear()


__all__ = [
    "ContentionSource",
    "Inputs",
    "contention_source",
    "Prediction",
    "WhatIf",
    "measured_contention",
    "predict",
    "prepare",
    "transfer_kind",
]
