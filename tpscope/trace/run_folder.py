"""Run folders: find the rank files, read each, and put the ranks in order (metrics.md §1)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpscope.errors import TraceError, UserError
from tpscope.numbers import number
from tpscope.runfolder.layout import (
    MANIFEST_NAME,
    OLDER_MANIFEST_NAMES,
    is_trace_name,
    manifest_path,
)
from tpscope.runfolder.manifest import Manifest, manifest_from_bytes
from tpscope.runfolder.manifest import read_manifest as read_typed_manifest
from tpscope.trace.assemble import assemble
from tpscope.trace.beside import threads_for
from tpscope.trace.columns import MISSING
from tpscope.trace.compact import PackedRank, RankHeader, compact_rank, header_of, pack
from tpscope.trace.ranks import RankList
from tpscope.trace.read import native, parallel, strategy, stream
from tpscope.trace.read.decode import base_time_ns, decode_trace, gunzip, read_bytes
from tpscope.trace.read.extract import arguments_too_deep, extract, merge
from tpscope.trace.tables import RankTrace

# join keys within one file
_ID_COLUMNS = frozenset({"correlation", "external_id", "wait_on_event_corr"})


@dataclass(frozen=True, slots=True)
class Run:
    """Every rank of one run folder, ordered by rank."""

    path: Path | str  # a `Url` for object storage
    ranks: RankList  # a tuple or list of `RankTrace` is taken as one
    manifest: Manifest | None
    warnings: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.ranks, RankList):
            object.__setattr__(self, "ranks", RankList(self.ranks))

    @property
    def rank_ids(self) -> list[int]:
        return [h.rank for h in self.ranks.headers]


def find_trace_files(path: Path) -> list[Path]:
    """The candidate trace files of a run folder (or the one file given), sorted by name."""
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UserError(f"{path}: not a file or folder")
    try:
        entries = sorted(path.iterdir())
    except OSError as exc:
        raise UserError(f"{path}: cannot be listed ({exc.strerror or exc})") from None
    files = _trace_files(entries)
    if not files:
        runs = find_runs(path)
        if runs:
            names = ", ".join(r.name for r in runs[:4]) + (", ..." if len(runs) > 4 else "")
            raise UserError(
                f"{path}: a folder of {len(runs)} runs ({names}), not one run: name one of them "
                "(analyze and dash open them all)"
            )
        manifest, _ = read_manifest(path)
        stopped = (
            f"; its manifest says the run did not finish ({manifest.stopped or 'no reason recorded'})"
            if manifest is not None and not manifest.finished
            else ""
        )
        raise UserError(
            f"{path}: no trace files (*.json or *.json.gz from torch.profiler) in this folder{stopped}"
        )
    return files


def _trace_files(entries: list[Path]) -> list[Path]:
    return [p for p in entries if is_trace_name(p.name) and _is_regular_file(p)]


def find_runs(path: str | Path) -> list[Path]:
    """The run folders `path` stands for, sorted by name: itself when it holds trace files (or is
    one), else its subfolders that do, one run each, as `tensorboard_trace_handler` users keep
    them (one log directory, one subfolder per run). Empty when there is neither."""
    path = Path(path)
    if path.is_file():
        return [path]
    try:
        entries = sorted(path.iterdir())
    except OSError:
        return []
    if _trace_files(entries):
        return [path]
    runs = []
    for sub in entries:
        try:
            if (
                sub.is_dir()
                and not sub.name.startswith(".")
                and _trace_files(sorted(sub.iterdir()))
            ):
                runs.append(sub)
        except OSError:
            continue
    return runs


def _is_regular_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:  # a symlink loop, a vanished file
        return False


def read_manifest(folder: Path) -> tuple[Manifest | None, list[str]]:
    """The run folder's manifest (None without one) and a warning when the run did not finish;
    ManifestError (a UserError naming the file and field) when it cannot be read."""
    return _with_warning(read_typed_manifest(folder), str(manifest_path(folder)))


def _with_warning(manifest: Manifest | None, where: str) -> tuple[Manifest | None, list[str]]:
    if manifest is None or manifest.finished:
        return manifest, []
    why = manifest.stopped or "no reason recorded"
    return manifest, [f"{where}: the run did not finish ({why}); its traces may miss steps"]


def read_url_manifest(url: str) -> tuple[Manifest | None, list[str]]:
    """`read_manifest` for an fsspec URL: the manifest in the folder it names, or beside the file
    (its name, else an older name that exists)."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url)
        folder = root if fs.isdir(root) else root.rstrip("/").rsplit("/", 1)[0]
        for name in (MANIFEST_NAME, *OLDER_MANIFEST_NAMES):
            path = f"{folder.rstrip('/')}/{name}"
            if fs.isfile(path):
                break
        else:
            return None, []
        data = fs.cat_file(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"{url}: its manifest cannot be read ({exc})") from None
    where = fs.unstrip_protocol(path)
    return _with_warning(manifest_from_bytes(data, where), where)


def load_rank_file(
    path: Path | str,
    fallback_rank: int | None = None,
    workers: int = 1,
    chunk_bytes: int = stream.CHUNK_BYTES,
) -> RankTrace:
    """Read one trace file into its map result (`compact.py`). Without `distributedInfo.rank`, use
    `fallback_rank` (with a warning).

    With `workers > 1`, a big file is decoded in that many processes (`parallel.py`); otherwise in
    one streaming pass of `chunk_bytes` of text at a time (`stream.py`).
    """
    trace, raw, warnings = _read_raw(path, workers, chunk_bytes)
    threads = threads_for(workers)  # numpy's sorts and searches two at a time
    rank = _rank_of(path, trace, fallback_rank, warnings)
    return compact_rank(assemble(path, trace, raw, rank, tuple(warnings), threads), threads)


def load_rank_cycles(paths: list[Path]) -> RankTrace:
    """One rank written in several files, one per profiling cycle (`schedule(repeat=N)`): their
    events as one trace, so that the cycles' steps follow one another (metrics.md §3)."""
    read = [_read_raw(p, 1) for p in paths]
    warnings = [w for _, _, ws in read for w in ws]
    trace = read[0][0]
    rank = _rank_of(paths[0], trace, None, warnings)
    raws = [raw for _, raw, _ in read]
    offset = 0
    for (
        raw
    ) in raws:  # ids restart in each file: keep each cycle's launches joined to its own kernels
        top = 0
        for cols in raw.groups.values():
            for name in _ID_COLUMNS.intersection(cols):
                has = cols[name] != MISSING
                cols[name] = np.where(has, cols[name] + offset, MISSING)
                top = max(top, int(cols[name].max()) + 1 if has.any() else 0)
        offset = max(offset, top)
    return compact_rank(assemble(paths[0], trace, merge(raws), rank, tuple(warnings)))


def _rank_of(path: Path, trace, fallback_rank: int | None, warnings: list[str]) -> int:
    di = trace.distributedInfo
    rank = di.rank if di is not None and isinstance(di.rank, int) and di.rank >= 0 else None
    if rank is None:
        if fallback_rank is None:
            fallback_rank = 0
        warnings.append(
            f"{path}: no distributedInfo.rank; taken as rank {fallback_rank} from its place in the folder"
        )
        rank = fallback_rank
    return rank


def _read_raw(path: Path | str, workers: int, chunk_bytes: int = stream.CHUNK_BYTES):
    """(header, raw columns with absolute times, warnings) of one trace file."""
    parts = data = None
    local = not is_url(path)
    plan = strategy.choose(
        parallel.text_size(path) if local and workers > 1 else None,
        workers,
        native.available(),
        parallel.can_fork(),
        local,
        parallel.can_inflate_in_parallel(),
    )
    if plan.how == "parts":
        parts = parallel.read_in_parts(path, plan.workers, plan.inflate_threads)
    if parts is None:
        parts = _stream_file(path, chunk_bytes, plan.threads)
    if parts is not None:
        trace, raw, warnings = parts.header, parts.raw, []
        raw.shift_times(base_time_ns(path, trace))
    else:  # an unusual layout, odd field types or a damaged file: one piece, precise errors
        if data is None:
            data = _read_url(path) if is_url(path) else read_bytes(path)
        decoded = decode_trace(path, data)
        del data
        trace, warnings = decoded.trace, list(decoded.warnings)
        if not trace.traceEvents:
            raise TraceError(path, "no trace events (empty traceEvents)")
        raw = extract(trace.traceEvents, base_time_ns(path, trace))
        trace.traceEvents = []
    if arguments_too_deep(raw):
        raise TraceError(path, "JSON nested too deeply to be a Kineto trace (in an argument)")
    return trace, raw, warnings


class Url(str):
    """An fsspec URL where a local `Path` would be: it prints as itself; `.name` is its last part."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]


def _stream_file(path: Path | str, chunk_bytes: int, threads: int = 1):
    try:
        with _open(path) as fh:
            return stream.decode_streaming(fh, chunk_bytes, threads)
    except OSError:
        return None  # the one-piece reader names the problem


def _open(path: Path | str):
    if is_url(path):
        import fsspec

        return fsspec.open(str(path), "rb").open()
    return Path(path).open("rb")


def _read_url(url: str) -> bytes:
    """A URL's bytes, gunzipped like `decode.read_bytes` does for a local file."""
    try:
        with _open(url) as fh:
            raw = fh.read()
    except (OSError, ValueError) as exc:
        raise TraceError(url, f"cannot be read ({exc})") from None
    return gunzip(url, raw)


def find_url_files(url: str) -> list[str]:
    """The trace files at an fsspec URL (a folder or one file), sorted by name."""
    try:
        import fsspec
    except ImportError:
        raise UserError(f"{url}: reading URLs needs fsspec (pip install 'tpscope[ray]')") from None
    try:
        fs, root = fsspec.core.url_to_fs(url)
        if fs.isfile(root):
            return [Url(url)]
        names = sorted(fs.ls(root, detail=False)) if fs.isdir(root) else None
    except ImportError as exc:  # the filesystem's own package (s3fs, gcsfs ...) is missing
        raise UserError(f"{url}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{url}: cannot be listed ({exc})") from None
    if names is None:
        raise UserError(f"{url}: no such file or folder")
    files = [
        Url(fs.unstrip_protocol(n))
        for n in names
        if is_trace_name(n.rsplit("/", 1)[-1]) and fs.isfile(n)
    ]
    if not files:
        raise UserError(
            f"{url}: no trace files (*.json or *.json.gz from torch.profiler) in this folder"
        )
    return files


def _read_one(job: tuple[Path, int, int]) -> RankTrace | TraceError:
    path, position, workers = job
    try:
        return load_rank_file(path, fallback_rank=position, workers=workers)
    except TraceError as exc:
        return exc


def _load_one(job: tuple[Path, int, int]) -> PackedRank | TraceError:
    """The map in a worker: one rank file to its packed map result (`compact.py`), or why it
    cannot be read."""
    r = _read_one(job)
    return pack(r) if isinstance(r, RankTrace) else r


def _load_one_shared(job: tuple[Path, int, int]) -> PackedRank | TraceError:
    """`_load_one` for a Ray task: the packed bytes as a uint8 array, which Ray stores out of band
    and the driver reads in place from its object store, where bytes would be copied out of it."""
    r = _load_one(job)
    if isinstance(r, PackedRank):
        return dataclasses.replace(r, data=np.frombuffer(r.data, np.uint8))
    return r


ENGINES = ("local", "ray")


def is_url(path: str | Path) -> bool:
    """An fsspec URL (`s3://`, `gs://`, `file://`, `memory://` ...) rather than a local path."""
    return "://" in str(path)


def load_run(
    path: str | Path,
    workers: int | None = None,
    engine: str = "local",
    address: str | None = None,
    progress=None,
    cache=None,
) -> Run:
    """Load every rank of a run folder (or a single trace file): a map over the rank files (each
    file to its map result, a compact `RankTrace`: `compact.py`), then a reduce on this process
    (ranks in order, warnings).

    engine "local": `workers` processes (default: every usable core) share the work: one big
    file is decoded in parts, several files are loaded side by side. engine "ray": one Ray task
    per file on the cluster at `address` (`ray_engine.py`); `progress(done, total)` is called as
    ranks finish. `path` may be an fsspec URL (object storage) for either engine. With `cache`
    (a `tpscope.cache.DiskCache`), a local file's map result stored before and still matching the
    file is read back instead of decoded, and the new ones are stored.
    """
    if engine not in ENGINES:
        raise UserError(f"--engine {engine}: unknown (choose from {', '.join(ENGINES)})")
    path = Url(path) if is_url(path) else Path(path)
    files = find_url_files(path) if isinstance(path, Url) else find_trace_files(path)
    workers = parallel.usable_cores() if workers is None else max(1, workers)
    jobs = [(f, i, 1) for f, i in zip(files, _worker_positions(files))]
    if cache is None or isinstance(path, Url):
        results: list = [None] * len(jobs)
    else:
        results = [cache.get_rank(f, i, expect=(PackedRank, RankTrace)) for f, i, _ in jobs]
    todo = [k for k, r in enumerate(results) if r is None]
    if engine == "ray":
        from tpscope.trace.ray_engine import map_ray

        done = len(jobs) - len(todo)
        step = None if progress is None else (lambda k, _n: progress(done + k, len(jobs)))
        mapped = map_ray(_load_one_shared, [jobs[k] for k in todo], address, step) if todo else []
    elif len(files) == 1 and todo:
        mapped = [_read_one((files[0], jobs[0][1], workers))]  # in this process: nothing to send
    else:
        mapped = parallel.map_files(_load_one, [jobs[k] for k in todo], workers)
    for k, r in zip(todo, mapped):
        results[k] = r
    if cache is not None and not isinstance(path, Url):
        cache.put_ranks(
            [
                (jobs[k][0], jobs[k][1], pack(r) if isinstance(r, RankTrace) else r)
                for k in todo
                if isinstance(r := results[k], (RankTrace, PackedRank))
            ]
        )
    return reduce_ranks(path, files, results)


def reduce_ranks(path: Path | Url, files: list, results: list) -> Run:
    """The `Run` from the map's results (a `PackedRank`, a `RankTrace` or the `TraceError` of each
    file). Packed ranks stay packed: the checks read their headers (`ranks.py`)."""
    warnings: list[str] = []
    ranks = [r for r in results if isinstance(r, (RankTrace, PackedRank))]
    refused = [str(r) for r in results if isinstance(r, TraceError)]
    if not ranks:
        if len(files) == 1:
            raise next(r for r in results if isinstance(r, TraceError))
        raise UserError(f"{path}: no readable trace among {len(files)} files (first: {refused[0]})")
    warnings.extend(f"skipped {r}" for r in refused)
    by_rank: dict[int, RankTrace | PackedRank] = {}
    for r in _join_cycles(ranks):
        h = header_of(r)
        by_rank[h.rank] = r
        warnings.extend(h.warnings)
    ordered = RankList(by_rank[k] for k in sorted(by_rank))
    if isinstance(path, Url):
        manifest, manifest_warnings = read_url_manifest(path)
    else:
        manifest, manifest_warnings = read_manifest(path if path.is_dir() else path.parent)
    warnings.extend(manifest_warnings)
    _refuse_mixed_runs(path, ordered.headers)
    warnings.extend(_consistency_warnings(ordered.headers))
    return Run(path=path, ranks=ordered, manifest=manifest, warnings=tuple(warnings))


# metrics.md §1 "Combining ranks": the clocks of one job's hosts never disagree by this much, and a
# profiler window lasts seconds; rank files this far apart come from different runs.
MIXED_RUNS_GAP_NS = 600 * 10**9


def _refuse_mixed_runs(path: Path, ranks: tuple[RankHeader, ...]) -> None:
    """One line and exit 2 when the folder holds rank files of different runs: ranks that disagree on
    the world size, or whose traces lie more than MIXED_RUNS_GAP_NS apart."""
    sizes = {}
    for r in ranks:
        if r.world_size is not None:
            sizes.setdefault(r.world_size, r)
    if len(sizes) > 1:
        (a, ra), (b, rb) = sorted(sizes.items())[:2]
        raise UserError(
            f"{path}: rank files of different runs: {ra.path.name} has world size {a}, "
            f"{rb.path.name} world size {b}"
        )
    spans = [(r.gpu_span_ns, r) for r in ranks if r.gpu_span_ns is not None]
    if len(spans) < 2:
        return
    first = min(spans, key=lambda x: x[0][0])
    last = max(spans, key=lambda x: x[0][0])
    gap = last[0][0] - first[0][1]
    if gap > MIXED_RUNS_GAP_NS:
        raise UserError(
            f"{path}: rank files of different runs: {last[1].path.name} (rank {last[1].rank}) starts "
            f"{number(gap / 1e9, 'count')} s after {first[1].path.name} (rank {first[1].rank}) ends"
        )


_HANDLER_NAME = re.compile(r"^(.*)\.\d+\.pt\.trace\.json(\.gz)?$")  # WORKER.TIMESTAMP.pt.trace.json


def _worker_positions(files: list[Path]) -> list[int]:
    """Per file: the place of its worker among the folder's (tensorboard_trace_handler names files
    WORKER.TIMESTAMP.pt.trace.json[.gz]; one worker's cycles share a place), the rank a file
    without distributedInfo.rank is taken as."""
    names = [m.group(1) if (m := _HANDLER_NAME.match(f.name)) else f.name for f in files]
    order = {n: k for k, n in enumerate(dict.fromkeys(names))}
    return [order[n] for n in names]


def _span(h: RankHeader) -> tuple[int, int]:
    """First start and last end of a rank's activity (its steps' windows when it has any)."""
    if len(h.steps):
        return int(h.steps.start_ns.min()), int(h.steps.end_ns.max())
    return h.gpu_span_ns or (0, 0)


def _join_cycles(ranks: list[RankTrace | PackedRank]) -> list[RankTrace | PackedRank]:
    """One trace per rank: files claiming the same rank whose steps do not overlap in time are
    that rank's profiling cycles (`schedule(repeat=N)`), read again as one; files that overlap
    are two runs in one folder, refused."""
    groups: dict[int, list[RankHeader]] = {}
    item: dict[int, RankTrace | PackedRank] = {}
    for r in ranks:
        h = header_of(r)
        groups.setdefault(h.rank, []).append(h)
        item[id(h)] = r
    out = []
    for rank, group in groups.items():
        if len(group) == 1:
            out.append(item[id(group[0])])
            continue
        group.sort(key=_span)
        for a, b in zip(group, group[1:]):
            if _span(b)[0] < _span(a)[1] or _span(a) == (0, 0):
                raise UserError(
                    f"{a.path} and {b.path} both claim rank {rank} at the same time: "
                    "two runs in one folder? Give each run its own folder"
                )
        out.append(load_rank_cycles([r.path for r in group]))
    return out


def rank_ranges(ranks: list[int]) -> str:
    """Sorted rank numbers as runs: [0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts, start = [], None
    for k, r in enumerate(ranks):
        if start is None:
            start = r
        if k + 1 == len(ranks) or ranks[k + 1] != r + 1:
            parts.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return ", ".join(parts)


def _consistency_warnings(ranks: tuple[RankHeader, ...]) -> list[str]:
    out: list[str] = []
    sizes = {r.world_size for r in ranks if r.world_size is not None}
    if sizes:
        size = max(sizes)
        present = {r.rank for r in ranks}
        missing = sorted(set(range(size)) - present)
        beyond = sorted(k for k in present if k >= size)
        if beyond:
            out.append(
                f"rank(s) {beyond} beyond the world size {size} (ranks are 0 to {size - 1}): "
                "a file from another run, or a wrong distributedInfo"
            )
        if missing:
            out.append(
                f"world size {size} but no trace for {len(missing)} rank(s): {rank_ranges(missing)}"
            )
    steps = {r.rank: tuple(r.steps.step.tolist()) for r in ranks}
    if len(set(steps.values())) > 1:
        out.append(
            "ranks have different steps: "
            + "; ".join(f"rank {k}: {list(v)}" for k, v in steps.items())
        )
    for r in ranks:
        if r.gpu_rows == 0 and not r.cpu_run:
            out.append(
                f"{r.path}: no GPU activity (kernels, memcpys, memsets); its metrics are empty"
            )
    return out
