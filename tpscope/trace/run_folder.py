"""Run folders: find the rank files, read each, and put the ranks in order (metrics.md §1)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tpscope.errors import TraceError, UserError
from tpscope.trace import parallel, stream
from tpscope.trace.assemble import assemble
from tpscope.trace.decode import decode_trace, gunzip, read_bytes
from tpscope.trace.extract import extract
from tpscope.trace.tables import RankTrace

MANIFEST_NAME = "tpscope_run.json"
TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True, slots=True)
class Run:
    """Every rank of one run folder, ordered by rank."""

    path: Path | str  # a str for an fsspec URL
    ranks: tuple[RankTrace, ...]
    manifest: dict | None
    warnings: tuple[str, ...]

    @property
    def rank_ids(self) -> list[int]:
        return [r.rank for r in self.ranks]


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
    files = [
        p
        for p in entries
        if p.name != MANIFEST_NAME and p.name.endswith(TRACE_SUFFIXES) and _is_regular_file(p)
    ]
    if not files:
        raise UserError(f"{path}: no trace files (*.json or *.json.gz from torch.profiler) in this folder")
    return files


def _is_regular_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:  # a symlink loop, a vanished file
        return False


def read_manifest(folder: Path) -> tuple[dict | None, list[str]]:
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return None, []
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [f"{path}: manifest ignored ({exc})"]
    if not isinstance(manifest, dict):
        return None, [f"{path}: manifest ignored (not a JSON object)"]
    return manifest, []


def load_rank_file(path: Path | str, fallback_rank: int | None = None, workers: int = 1,
                   chunk_bytes: int = stream.CHUNK_BYTES) -> RankTrace:
    """Read one trace file. Without `distributedInfo.rank`, use `fallback_rank` (with a warning).

    With `workers > 1`, a big file is decoded in that many processes (`parallel.py`); otherwise in
    one streaming pass whose memory is bounded by `chunk_bytes` of text (`stream.py`).
    """
    parts = data = None
    if workers > 1 and parallel.can_fork() and not is_url(path):
        data = read_bytes(path)
        if len(data) >= parallel.SPLIT_MIN_BYTES:
            buf = bytearray(data)  # cut in place; the copy costs less than the cut documents would
            data = None
            parts = parallel.decode_in_parts(buf, workers)
            del buf
    else:
        parts = _stream_file(path, chunk_bytes)
    if parts is not None:
        trace, raw, warnings = parts.header, parts.raw, []
        raw.shift_times(int(trace.baseTimeNanoseconds or 0))
    else:  # an unusual layout, odd field types or a damaged file: one piece, precise errors
        if data is None:
            data = _read_url(path) if is_url(path) else read_bytes(path)
        decoded = decode_trace(path, data)
        del data
        trace, warnings = decoded.trace, list(decoded.warnings)
        if not trace.traceEvents:
            raise TraceError(path, "no trace events (empty traceEvents)")
        raw = extract(trace.traceEvents, int(trace.baseTimeNanoseconds or 0))
        trace.traceEvents = []
    di = trace.distributedInfo
    rank = di.rank if di is not None and isinstance(di.rank, int) and di.rank >= 0 else None
    if rank is None:
        if fallback_rank is None:
            fallback_rank = 0
        warnings.append(f"{path}: no distributedInfo.rank; taken as rank {fallback_rank} from its place in the folder")
        rank = fallback_rank
    return assemble(path, trace, raw, rank, tuple(warnings))


def _stream_file(path: Path | str, chunk_bytes: int):
    try:
        with _open(path) as fh:
            return stream.decode_streaming(fh, chunk_bytes)
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
            return [url]
        names = sorted(fs.ls(root, detail=False)) if fs.isdir(root) else None
    except ImportError as exc:  # the filesystem's own package (s3fs, gcsfs ...) is missing
        raise UserError(f"{url}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{url}: cannot be listed ({exc})") from None
    if names is None:
        raise UserError(f"{url}: no such file or folder")
    files = [fs.unstrip_protocol(n) for n in names
             if n.rsplit("/", 1)[-1] != MANIFEST_NAME and n.endswith(TRACE_SUFFIXES) and fs.isfile(n)]
    if not files:
        raise UserError(f"{url}: no trace files (*.json or *.json.gz from torch.profiler) in this folder")
    return files


def _load_one(job: tuple[Path, int, int]) -> RankTrace | TraceError:
    path, position, workers = job
    try:
        return load_rank_file(path, fallback_rank=position, workers=workers)
    except TraceError as exc:
        return exc


ENGINES = ("local", "ray")


def is_url(path: str | Path) -> bool:
    """An fsspec URL (`s3://`, `gs://`, `file://`, `memory://` ...) rather than a local path."""
    return "://" in str(path)


def load_run(path: str | Path, workers: int | None = None, engine: str = "local",
             address: str | None = None, progress=None) -> Run:
    """Load every rank of a run folder (or a single trace file): a map over the rank files (each
    file to its compact `RankTrace`), then a reduce on this process (ranks in order, warnings).

    engine "local": `workers` processes (default: every usable core) share the work: one big
    file is decoded in parts, several files are loaded side by side. engine "ray": one Ray task
    per file on the cluster at `address` (`ray_engine.py`); `progress(done, total)` is called as
    ranks finish. `path` may be an fsspec URL (object storage) for either engine.
    """
    if engine not in ENGINES:
        raise UserError(f"--engine {engine}: unknown (choose from {', '.join(ENGINES)})")
    url = is_url(path)
    if not url:
        path = Path(path)
    files = find_url_files(str(path)) if url else find_trace_files(path)
    workers = parallel.usable_cores() if workers is None else max(1, workers)
    if engine == "ray":
        from tpscope.trace.ray_engine import map_ray

        results = map_ray(_load_one, [(f, i, 1) for i, f in enumerate(files)], address, progress)
    elif len(files) == 1:
        results = [_load_one((files[0], 0, workers))]
    else:
        results = parallel.map_files(_load_one, [(f, i, 1) for i, f in enumerate(files)], workers)
    return reduce_ranks(path, files, results)


def reduce_ranks(path: str | Path, files: list, results: list) -> Run:
    """The `Run` from the map's results (a `RankTrace` or the `TraceError` of each file)."""
    warnings: list[str] = []
    ranks = [r for r in results if isinstance(r, RankTrace)]
    refused = [str(r) for r in results if isinstance(r, TraceError)]
    if not ranks:
        if len(files) == 1:
            raise next(r for r in results if isinstance(r, TraceError))
        raise UserError(f"{path}: no readable trace among {len(files)} files (first: {refused[0]})")
    warnings.extend(f"skipped {r}" for r in refused)
    by_rank: dict[int, RankTrace] = {}
    for r in ranks:
        if r.rank in by_rank:
            raise UserError(f"{by_rank[r.rank].path} and {r.path} both claim rank {r.rank}")
        by_rank[r.rank] = r
        warnings.extend(r.warnings)
    ordered = tuple(by_rank[k] for k in sorted(by_rank))
    if is_url(path):
        manifest, manifest_warnings = None, []
    else:
        manifest, manifest_warnings = read_manifest(path if path.is_dir() else path.parent)
    warnings.extend(manifest_warnings)
    warnings.extend(_consistency_warnings(ordered))
    return Run(path=path, ranks=ordered, manifest=manifest, warnings=tuple(warnings))


def _consistency_warnings(ranks: tuple[RankTrace, ...]) -> list[str]:
    out: list[str] = []
    sizes = {r.world_size for r in ranks if r.world_size is not None}
    if len(sizes) > 1:
        out.append(f"ranks disagree on the world size ({sorted(sizes)}): files from different runs?")
    elif sizes:
        (size,) = sizes
        missing = sorted(set(range(size)) - {r.rank for r in ranks})
        if missing and len(ranks) < size:
            out.append(f"world size {size} but no trace for rank(s) {missing}")
    steps = {r.rank: tuple(r.steps.step.tolist()) for r in ranks}
    if len(set(steps.values())) > 1:
        out.append("ranks have different steps: " + "; ".join(f"rank {k}: {list(v)}" for k, v in steps.items()))
    for r in ranks:
        if len(r.gpu) == 0:
            out.append(f"{r.path}: no GPU activity (kernels, memcpys, memsets); its metrics are empty")
    return out
