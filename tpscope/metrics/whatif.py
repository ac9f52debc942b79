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
    SM_MODES,
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
class ContentionSource:
    """What `fuse=` takes from a fused run of the same regime (`--contention-from`)."""

    slowdown: float  # measured_contention
    source: str  # what it was measured on
    transfers: str  # "sm" or "copy" (transfer_kind): the fuse modes it applies to
    fits: dict = field(default_factory=dict)  # its α-β fit per kind: chunk transfers beside GEMMs
    # the slowdown of its GEMMs beside point-to-point transfers ("p2p": send/recv, a ring's
    # pieces) and beside the others ("coll"), and per (GEMM shape, that kind)
    by_beside: dict = field(default_factory=dict)
    by_shape: dict = field(default_factory=dict)


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
    """Per step, the most comm time of any rank not covered by its compute, mean over steps."""
    acts = inp.acts
    is_comm = acts.cls == ActivityClass.COMM
    is_comp = acts.cls == ActivityClass.COMPUTE
    per: dict[int, float] = {}
    for pos in range(len(acts.rank_ids)):
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        s, e, stp = st[lo:hi], en[lo:hi], acts.step[lo:hi]
        cover = iv.union(s[is_comp[lo:hi]], e[is_comp[lo:hi]])
        c = np.flatnonzero(is_comm[lo:hi] & (stp >= 0))
        ex = (e[c] - s[c]) - iv.overlap_with_set(s[c], e[c], cover)
        for k in np.unique(stp[c]).tolist():
            v = float(ex[stp[c] == k].sum()) / NS_PER_US
            per[k] = max(per.get(k, 0.0), v)
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
        for c in sorted(group, key=lambda c: ORDER.index(c.kind)):
            later = fuses[fuses.index(c) + 1 :] if c.kind == "fuse" else []
            taken = (
                np.logical_or.reduce([selected_pairs(inp.pairs, x.target) for x in later])
                if later
                else None
            )
            _apply(inp, d, c, contention, base_ns, times, links, taken)
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


ORDER = ("comm", "link", "hide", "contention", "fuse")


def _links(group: list[Change]) -> dict:
    """The link= changes of one row that time a whole kind (untargeted: "*"), by kind."""
    out = {}
    for c in group:
        if c.kind == "link" and (c.target is None or c.target in KINDS):
            out[c.target or "*"] = (c.gbps, c.lat_us)
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


def transfer_kind(inp: Inputs) -> str:
    """Whether a fused run's transfers take SMs ("sm": NCCL or ring kernels) or copy engines
    ("copy"): by its manifest's modes, else by the share of its comm time in `Memcpy` activities."""
    m = inp.run.manifest
    layers = (m.fusion_by_layer or {}) if m is not None else {}
    modes = [v.get("mode") for v in layers.values() if isinstance(v, dict)]
    modes = [x for x in modes if x and x != "none"]  # each layer's: a count, not a set
    if modes:
        copy = sum(x not in SM_MODES for x in modes)
        return "copy" if copy * 2 > len(modes) else "sm"
    acts = inp.acts
    names = np.array(acts.strings + ("",), dtype=object)
    comm = np.flatnonzero(inp.rg.is_comm)
    dur = (acts.end_ns - acts.start_ns)[comm]
    is_copy = np.array([str(x).startswith("Memcpy") for x in names[acts.name[comm]]], bool)
    return "copy" if dur[is_copy].sum() * 2 > dur.sum() else "sm"


P2P, COLL = "p2p", "coll"
BESIDE_WORDS = {P2P: "beside send/recv", COLL: "beside collectives"}


def _slowdown(dur: np.ndarray, base: np.ndarray) -> float | None:
    """metrics.md §11: Σ(dur − baseline) / Σ baseline."""
    den = float(base.sum())
    return float((dur - base).sum()) / den if den > 0 else None


def _beside_rows(inp: Inputs, reference: Inputs | None):
    """(GEMMs beside comm with a baseline, and per GEMM: duration, baseline, whether most of the
    communication beside it was point-to-point)."""
    pools = [inp.samples, reference.samples if reference is not None else {}]
    base = gemm_baselines_ns(inp.gemms, pools)
    rows = inp.gemms.act
    b = base[inp.gemms.shape]
    f = inp.overlap_f[rows]
    hit = (f >= 0.5) & np.isfinite(b) & (inp.acts.step[rows] >= 0)
    p2p_rows = inp.rg.is_comm & (inp.comm.row_kind == "send_recv")
    f_p2p = comm_overlap_fraction(inp.acts, p2p_rows)[rows] if p2p_rows.any() else 0.0 * f
    dur = (inp.acts.end_ns - inp.acts.start_ns)[rows].astype(float)
    return np.flatnonzero(hit), dur, b, f_p2p * 2 > f


def measured_contention(inp: Inputs, reference: Inputs | None = None) -> float | None:
    """The GEMM slowdown beside communication measured on a (fused) run (`_slowdown`) over its
    GEMMs that overlapped comm (f >= 0.5, §8) and have a §8 baseline (its own isolated samples,
    then `reference`'s)."""
    hit, dur, b, _ = _beside_rows(inp, reference)
    return _slowdown(dur[hit], b[hit]) if len(hit) else None


def contention_source(inp: Inputs, reference: Inputs | None, label: str) -> ContentionSource | None:
    """What `--contention-from` takes from the fused run `inp` (metrics.md §11): its slowdown
    beside communication, overall, by the kind of transfer beside the GEMMs (send/recv or
    collectives) and per GEMM shape and that kind; its α-β fit. None without a GEMM beside comm
    with a baseline."""
    hit, dur, b, p2p = _beside_rows(inp, reference)
    if not len(hit):
        return None
    shapes = inp.gemms.shapes
    sid = inp.gemms.shape
    by_beside, by_shape = {}, {}
    for beside, mask in ((P2P, p2p[hit]), (COLL, ~p2p[hit])):
        rows = hit[mask]
        if len(rows) and (s := _slowdown(dur[rows], b[rows])) is not None:
            by_beside[beside] = s
        for k in np.unique(sid[rows]).tolist():  # a loop over distinct shapes
            one = rows[sid[rows] == k]
            if (s := _slowdown(dur[one], b[one])) is not None:
                by_shape[(shapes[k], beside)] = s
    return ContentionSource(
        _slowdown(dur[hit], b[hit]) or 0.0,
        label,
        transfer_kind(inp),
        inp.fits,
        by_beside,
        by_shape,
    )


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
