"""The run folders the dashboard was started with, and their parsed, analyzed contents.

The browser only ever names a run by its id (the folder's name); `RunStore.entry` refuses any
other string, so no URL or input can make the app read a path it was not given.
Results come from `tpscope.trace.load_run` and `tpscope.metrics` only, cached on disk per
(folder, modification time) and in memory for the life of the process.
"""

from __future__ import annotations

import inspect
import logging
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpscope.cache import DiskCache, folder_fingerprint
from tpscope.errors import UserError
from tpscope.metrics import RunAnalysis, analyze_run, as_json
from tpscope.runfolder.manifest import Manifest, read_manifest
from tpscope.trace import Run, load_run

log = logging.getLogger("tpscope.dash")


class UnknownRun(UserError):
    """A run id that is not one of the folders the dashboard was started with."""


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One folder the dashboard serves."""

    run_id: str
    path: Path


@dataclass(frozen=True, slots=True)
class LoadedRun:
    """A run folder, read and analyzed; `doc` is the JSON of `tpscope analyze --json`."""

    entry: RunEntry
    run: Run
    analysis: RunAnalysis
    doc: dict
    version: str = ""  # the folder's fingerprint when it was read

    @property
    def key(self) -> tuple[str, str]:
        return self.entry.run_id, self.version


@dataclass(frozen=True, slots=True)
class HtaResult:
    """HTA's temporal and idle-time breakdowns (pandas frames), or why there are none."""

    temporal: Any = None
    idle: Any = None
    error: str | None = None  # neither breakdown: why, in one line
    partial: str | None = None  # one breakdown only: why not the other, in one line


@dataclass
class _Memo:
    lock: threading.Lock = field(default_factory=threading.Lock)
    value: Any = None


MAX_MEMOS = 256
MAX_VERSIONS_PER_RUN = 2
"""Versions of one folder kept in memory: the newest and the one before it (a callback may still
hold it); a folder rewritten while served never piles up its older reads."""
EXPERIMENT_KEYS = ("regime", "tp", "model", "dtype", "seq_len", "batch")
"""Manifest fields a fused run and its unfused baseline share (one experiment, one change)."""


def _version(path: Path) -> str:
    """The folder as it is now (names, sizes, mtimes): a rewritten run is read again."""
    try:
        return folder_fingerprint(path)
    except OSError:
        return "unreadable"


def _unique_ids(paths: list[Path]) -> list[str]:
    ids: list[str] = []
    for p in paths:
        base = p.name or str(p)
        candidate, n = base, 2
        while candidate in ids:
            candidate, n = f"{base}-{n}", n + 1
        ids.append(candidate)
    return ids


def error_line(exc: BaseException, path: Path) -> str:
    """One line for the page: a UserError's own message, else the type and message."""
    if isinstance(exc, UserError):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{path}: could not be read ({type(exc).__name__}{': ' + text if text else ''})"


class RunStore:
    """Registry of the served run folders; loads each once (disk cache, then memory)."""

    def __init__(self, paths: list[Path], cache: DiskCache | None = None) -> None:
        paths = [Path(p) for p in paths]
        self.entries = [RunEntry(i, p) for i, p in zip(_unique_ids(paths), paths)]
        self._by_id = {e.run_id: e for e in self.entries}
        self.cache = cache
        self._memos: dict[tuple, _Memo] = {}
        self._versions: dict[str, list[str]] = {}  # run id -> versions in memory, oldest first
        self._lock = threading.Lock()

    @property
    def run_ids(self) -> list[str]:
        return [e.run_id for e in self.entries]

    def entry(self, run_id: object) -> RunEntry:
        """The served folder named `run_id`; UnknownRun for anything else (never a path)."""
        if isinstance(run_id, str) and run_id in self._by_id:
            return self._by_id[run_id]
        shown = str(run_id)[:80]
        raise UnknownRun(
            f"unknown run {shown!r}: this dashboard serves only the folders it was started with"
        )

    def _forget_old_versions(self, run_id: str, version: str) -> None:
        """Note `version` of `run_id` as the newest; drop every memo of the versions beyond
        MAX_VERSIONS_PER_RUN (a memo keyed by several runs goes with any of them). Under _lock."""
        held = self._versions.setdefault(run_id, [])
        if version in held:
            held.remove(version)
        held.append(version)
        while len(held) > MAX_VERSIONS_PER_RUN:
            old = held.pop(0)
            for key in [k for k in self._memos if _names_version(k, run_id, old)]:
                del self._memos[key]

    def _memo(self, key: tuple) -> _Memo:
        with self._lock:
            if key[0] == "run" and key not in self._memos:
                self._forget_old_versions(key[1], key[2])
            if key not in self._memos and len(self._memos) >= MAX_MEMOS:
                # the oldest: a folder rewritten many times
                self._memos.pop(next(iter(self._memos)))
            return self._memos.setdefault(key, _Memo())

    def load(self, run_id: object) -> LoadedRun:
        """The run and its analysis; UserError (one line) when the folder is not a readable run."""
        entry = self.entry(run_id)
        version = _version(entry.path)
        memo = self._memo(("run", entry.run_id, version))
        with memo.lock:
            if memo.value is None:
                memo.value = self._load(entry, version)
        if isinstance(memo.value, Exception):
            raise memo.value
        return memo.value

    def _load(self, entry: RunEntry, version: str) -> LoadedRun | Exception:
        def compute() -> tuple[Run, RunAnalysis]:
            run = load_run(entry.path, cache=self.cache)
            return run, analyze_run(run)

        try:
            if self.cache is not None and entry.path.exists():
                run, analysis = self.cache.get_or_compute(
                    "run", entry.path, compute, expect=_is_run_and_analysis
                )
            else:
                run, analysis = compute()
            return LoadedRun(entry, run, analysis, as_json(analysis), version)
        except Exception as exc:  # one line on the page; the app keeps serving
            if not isinstance(exc, UserError):
                log.exception("reading %s", entry.path)
            return UserError(error_line(exc, entry.path))

    def headroom(self, run_id: object):
        """The run's what-if headroom (tpscope.metrics.headroom), replayed once per version of the
        folder; None for a run without communication, or one the replay cannot take."""
        loaded = self.load(run_id)
        memo = self._memo(("headroom", loaded.entry.run_id, loaded.version))
        with memo.lock:
            if memo.value is None:
                from tpscope.metrics.headroom import headroom

                try:
                    memo.value = (headroom(loaded.run),)
                except Exception:  # the bound is an extra: the Overview shows the rest
                    log.exception("what-if headroom of %s", loaded.entry.path)
                    memo.value = (None,)
        return memo.value[0]

    def ready(self, run_id: object) -> LoadedRun | Exception | None:
        """The run if it has been read (or why it could not be), None while it is still unread:
        never waits and never reads."""
        entry = self.entry(run_id)
        memo = self._memos.get(("run", entry.run_id, _version(entry.path)))
        return None if memo is None else memo.value

    def read_all_in_background(self, first: str | None = None) -> None:
        """Read every served run, one after another, in a background thread (once per process), so
        that the Overview can show each run as its analysis arrives; `first` (a run id) is read
        before the others."""
        with self._lock:
            if getattr(self, "_reader", None) is not None:
                return
            order = [e.run_id for e in self.entries]
            if first in order:
                order.remove(first)
                order.insert(0, first)
            self._reader = threading.Thread(
                target=self._read_all, args=(order,), name="tpscope-read-runs", daemon=True
            )
        self._reader.start()

    def _read_all(self, order: list[str]) -> None:
        for run_id in order:
            try:
                self.load(run_id)
            except Exception:  # the error is memoized; the Overview shows its line
                pass

    def hta_cached(self, run_id: object) -> bool:
        """Whether HTA's results for the run are at hand (in memory or on disk) without parsing."""
        loaded = self.load(run_id)
        memo = self._memos.get(("hta", *loaded.key))
        if memo is not None and memo.value is not None:
            return True
        if self.cache is None:
            return False
        try:
            return (
                self.cache.folder / f"hta-{self.cache.key('hta', loaded.entry.path)}.pkl"
            ).exists()
        except OSError:
            return False

    def suggested_baseline(self, run_id: object) -> str | None:
        """The unfused run of the same experiment among the served folders (manifest mode `none`,
        same EXPERIMENT_KEYS), the first by order given; None for an unfused run, a run without a
        manifest, or when no folder fits. Reads manifests only, never traces."""
        mine = _manifest_or_none(self.entry(run_id).path)
        if mine is None or mine.mode in (None, "none"):
            return None
        want = {k: getattr(mine, k) for k in EXPERIMENT_KEYS}
        for e in self.entries:
            if e.run_id == run_id:
                continue
            other = _manifest_or_none(e.path)
            if (
                other is not None
                and other.mode == "none"
                and all(getattr(other, k) == v for k, v in want.items())
            ):
                return e.run_id
        return None

    def incomparable(self, run_id: object, baseline_id: object) -> str | None:
        """Why `baseline_id` is no baseline for `run_id` (their manifests name different regimes,
        models, ...: `regime nvlink vs shm`), or None. Reads manifests only."""
        from tpscope.dashboards.results import comparable

        return comparable(
            _manifest_or_none(self.entry(run_id).path),
            _manifest_or_none(self.entry(baseline_id).path),
            EXPERIMENT_KEYS,
        )

    def compared(self, run_id: object, baseline_id: object) -> RunAnalysis:
        """The run analyzed against a baseline run (`reference`: isolated medians, Flux E)."""
        loaded = self.load(run_id)
        base = self.load(baseline_id)
        if not _accepts_reference():
            return loaded.analysis
        memo = self._memo(("vs", *loaded.key, *base.key))
        with memo.lock:
            if memo.value is None:
                memo.value = analyze_run(loaded.run, reference=base.run)
        return memo.value

    def activity_detail(self, run_id: object):
        """Per-activity collective membership, waits and the path graph
        (`tpscope.metrics.per_activity.ActivityDetail`), or None where they cannot be computed."""
        from tpscope.metrics.per_activity import activity_detail

        loaded = self.load(run_id)
        memo = self._memo(("cross", *loaded.key))
        with memo.lock:
            if memo.value is None:
                try:
                    memo.value = (activity_detail(loaded.run),)
                except Exception:
                    # the views then say "not available"; analyze_run's totals still show
                    log.exception("cross-rank detail of %s", loaded.entry.path)
                    memo.value = (None,)
        return memo.value[0]

    def gemm_shapes(self, run_id: object):
        """Per row of `activity_detail`: the GEMM shape label of that activity, "" for no GEMM
        (`overlays.gemm_shape_labels`), or None where it cannot be computed."""
        from tpscope.dashboards.overlays import gemm_shape_labels

        loaded = self.load(run_id)
        memo = self._memo(("gemm", *loaded.key))
        with memo.lock:
            if memo.value is None:
                try:
                    memo.value = (gemm_shape_labels(loaded.run),)
                except Exception:  # the Timeline then outlines 0 activities and says so
                    log.exception("GEMM shapes of %s", loaded.entry.path)
                    memo.value = (None,)
        return memo.value[0]

    def hta(self, run_id: object) -> HtaResult:
        """HTA's breakdowns for a served run (computed once; disk-cached like the run)."""
        loaded = self.load(run_id)
        memo = self._memo(("hta", *loaded.key))
        with memo.lock:
            if memo.value is None and loaded.doc.get("cpu_run"):
                memo.value = HtaResult(error=HTA_CPU_RUN)
            if memo.value is None:
                files = {r.rank: str(Path(r.path).resolve()) for r in loaded.run.ranks}

                def compute() -> HtaResult:
                    return run_hta(files)

                if self.cache is not None:
                    memo.value = self.cache.get_or_compute(
                        "hta", loaded.entry.path, compute, expect=HtaResult
                    )
                else:
                    memo.value = compute()
        return memo.value


def _accepts_reference() -> bool:
    try:
        return "reference" in inspect.signature(analyze_run).parameters
    except (TypeError, ValueError):
        return False


def _names_version(key: tuple, run_id: str, version: str) -> bool:
    """Whether a memo key (kind, run id, version[, run id, version]) names `version` of `run_id`."""
    pairs = key[1:]
    return any(pairs[i] == run_id and pairs[i + 1] == version for i in range(0, len(pairs) - 1, 2))


def _is_run_and_analysis(value: object) -> bool:
    """A cached "run" entry: (Run, RunAnalysis)."""
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], Run)
        and isinstance(value[1], RunAnalysis)
    )


HTA_CPU_RUN = (
    "HTA is not run on a CPU run: its breakdowns count GPU kernels and streams, and this run has "
    "none (the Breakdown tab counts its CPU threads)"
)


def _hta_why(exc: Exception) -> str:
    """Why HTA stopped, in a few words: its message, or for a bare `assert` of its own the check
    and where it is (a bare AssertionError says nothing)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    if text:
        return f"{type(exc).__name__}: {text}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and frames[-1].line:
        last = frames[-1]
        return f"its own check `{last.line}` at {Path(last.filename).name}:{last.lineno} failed"
    return type(exc).__name__


def run_hta(trace_files: dict[int, str]) -> HtaResult:
    """HTA's temporal and idle-time breakdowns of these rank files, parsed in this process; where
    HTA stops on one of them, the other alone and why.

    HTA's own constructor parses ranks in a forked pool; a fork from a threaded web server can
    deadlock, so the Trace is loaded here with `use_multiprocessing=False`.
    """
    try:
        from hta.common.trace import Trace
        from hta.trace_analysis import TraceAnalysis

        analysis = TraceAnalysis.__new__(TraceAnalysis)
        analysis.t = Trace(trace_files=trace_files)
        analysis.t.load_traces(
            include_last_profiler_step=True, use_multiprocessing=False, use_memory_profiling=False
        )
    except Exception as exc:  # HTA refuses some traces; the view says why
        return HtaResult(
            error=f"HTA could not analyze this run: it could not read it ({_hta_why(exc)})"
        )
    temporal = idle = None
    failed = []
    try:
        temporal = analysis.get_temporal_breakdown(visualize=False)
    except Exception as exc:
        failed.append(f"temporal breakdown ({_hta_why(exc)})")
    try:
        idle, _ = analysis.get_idle_time_breakdown(ranks=sorted(trace_files), visualize=False)
    except Exception as exc:
        failed.append(f"idle-time breakdown ({_hta_why(exc)})")
    if temporal is None and idle is None:
        return HtaResult(error="HTA could not analyze this run: its " + "; its ".join(failed))
    partial = f"HTA stopped on its {failed[0]}; the other breakdown is below." if failed else None
    return HtaResult(temporal=temporal, idle=idle, partial=partial)


def _manifest_or_none(folder: Path) -> Manifest | None:
    """A served folder's manifest; None without one or when it cannot be read (opening that run
    says why, in its one line)."""
    try:
        return read_manifest(folder)
    except UserError:
        return None
