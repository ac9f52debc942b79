"""Disk cache of analyzed runs, keyed by (folder, modification times, analyzer code), and of
each rank file's map result, keyed by (file, size, mtime, analyzer code).

A folder analyzed before is read back from one pickle instead of being decoded and analyzed
again (`tpscope analyze`, the dashboard). The key covers the name, size and mtime of every file the
loader reads (the traces and the manifest, also the manifest beside a trace file analyzed alone)
and the source of `tpscope.trace` (its C reader included), `tpscope.metrics`, `tpscope.runfolder`
and the JSON writer, so an edited trace or manifest or a changed analyzer never serves a stale
result. `tpscope analyze --json` keeps its text too, written again as it is. A folder re-analyzed
after one of its rank files changed decodes that one file: the other ranks' map results
(`tpscope.trace.compact`) are read back from `ranks/`. The cache lives in the user's own folder ($TPSCOPE_CACHE_DIR, else
~/.cache/tpscope); pickles are only read from there, never from a run folder, and nothing is ever
written into a run folder.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpscope.runfolder.layout import MANIFEST_NAME, manifest_path

ENV_VAR = "TPSCOPE_CACHE_DIR"
MAX_ENTRIES = 64  # oldest pickles beyond this are removed after each write
RANKS_FOLDER = "ranks"  # per-rank map results, pruned on their own (a run of 1,024 ranks fits)
MAX_RANK_ENTRIES = 4096
# every entry is (CACHE_MARK, CACHE_FORMAT, value): a pickle without them (another version's, or
# any other file) is recomputed, as is one whose value is not of the type its reader expects
CACHE_MARK = "tpscope-cache"
CACHE_FORMAT = 2


def default_cache_dir() -> Path:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tpscope"


def folder_fingerprint(path: Path) -> str:
    """Name, size and mtime (ns) of the folder and of every file directly in it; for a trace
    file, of the file and of the manifest beside it (everything the loader reads)."""
    path = path.resolve()
    parts = [str(path)]
    st = path.stat()
    parts.append(f"{st.st_mtime_ns}")
    if path.is_dir():
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            try:
                est = entry.stat()
            except OSError:
                continue
            parts.append(f"{entry.name}:{est.st_size}:{est.st_mtime_ns}")
    else:  # a trace file alone is analyzed with its folder's manifest: that is read too
        parts.append(f"{st.st_size}")
        manifest = manifest_path(path.parent)
        try:
            mst = manifest.stat()
            parts.append(f"{manifest.name}:{mst.st_size}:{mst.st_mtime_ns}")
        except OSError:
            parts.append(f"{MANIFEST_NAME}:absent")
    return "\n".join(parts)


# the packages whose code makes cached results: their Python sources, and the C reader's source and
# built extension in tpscope/trace
_CODE_FOLDERS = ("trace", "trace/read", "metrics", "runfolder")  # runfolder: the manifest
_CODE_FILES = ("*.py", "*.c", "*.h", "*.so", "*.pyd")
# single modules the results use: the GEMM rules metrics.md §8 reads, how the warnings print their
# numbers, and the JSON writer (the text of `tpscope analyze --json` is cached too)
_CODE_MODULES = ("gemm_shapes", "numbers", "jsonable")


def code_fingerprint() -> str:
    """Size and mtime of every source file of the parts that produce cached results (found by
    path, without importing them: a cached result opens without the analyzer's imports)."""
    import tpscope

    root = Path(tpscope.__file__).parent
    parts = [tpscope.__version__]
    for name in _CODE_FOLDERS:
        for f in sorted(p for pattern in _CODE_FILES for p in (root / name).glob(pattern)):
            st = f.stat()
            parts.append(f"tpscope.{name.replace('/', '.')}.{f.name}:{st.st_size}:{st.st_mtime_ns}")
    for name in _CODE_MODULES:
        f = root / f"{name}.py"
        parts.append(f"tpscope.{name}:{f.stat().st_size}:{f.stat().st_mtime_ns}")
    return "\n".join(parts)


class DiskCache:
    """Pickled values under `folder`, one file per key; unreadable entries are recomputed."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else default_cache_dir()
        self._code = code_fingerprint()
        self.hits = 0
        self.misses = 0
        self.rank_hits = 0  # per-rank map results, counted apart from whole analyses
        self.rank_misses = 0

    def key(self, kind: str, path: Path) -> str:
        text = f"{kind}\n{self._code}\n{folder_fingerprint(path)}"
        # a folder name that is not UTF-8 keys by its own bytes
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]

    def rank_file(self, path: Path, position: int) -> Path:
        """Where the map result of trace file `path` is kept: keyed by the file's identity (path,
        size, mtime), its place in its folder (the rank a file without one is given) and the code."""
        st = path.stat()
        text = f"rank\n{self._code}\n{path.resolve()}\n{st.st_size}:{st.st_mtime_ns}\n{position}"
        digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        return self.folder / RANKS_FOLDER / f"rank-{digest}.pkl"

    def get_rank(self, path: Path, position: int, expect: Any = None) -> Any:
        """The stored map result of `path`, or None (absent, unreadable, not of type `expect`, or
        the file changed)."""
        try:
            file = self.rank_file(path, position)
        except OSError:
            return None
        value = self._read(file, expect)
        if value is None:
            self.rank_misses += 1
        else:
            self.rank_hits += 1
        return value

    def put_ranks(self, items: list[tuple[Path, int, Any]]) -> None:
        """Store the map results of (path, position, result), then prune the oldest beyond
        MAX_RANK_ENTRIES."""
        for path, position, value in items:
            try:
                file = self.rank_file(path, position)
            except OSError:
                continue
            self._write(file, value, prune=False)
        if items:
            self._prune(self.folder / RANKS_FOLDER, MAX_RANK_ENTRIES)

    def get_or_compute(
        self, kind: str, path: Path, compute: Callable[[], Any], expect: Any = None
    ) -> Any:
        """The cached value for (kind, path as it is now), computing and storing it when absent
        or not what `expect` (a type, a tuple of types or a predicate) accepts."""
        file = self.folder / f"{kind}-{self.key(kind, path)}.pkl"
        value = self._read(file, expect)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        value = compute()
        self._write(file, value)
        return value

    def _read(self, file: Path, expect: Any = None) -> Any:
        try:
            with file.open("rb") as fh:
                entry = pickle.load(fh)
        except FileNotFoundError:
            return None
        except Exception:  # a truncated or foreign pickle: recompute and overwrite
            return None
        if not (
            isinstance(entry, tuple)
            and len(entry) == 3
            and entry[0] == CACHE_MARK
            and entry[1] == CACHE_FORMAT
        ):
            return None
        value = entry[2]
        if expect is None or value is None:
            return value
        try:
            fits = isinstance(value, expect) if isinstance(expect, (type, tuple)) else expect(value)
        except Exception:
            fits = False
        return value if fits else None

    def _write(self, file: Path, value: Any, prune: bool = True) -> None:
        tmp: str | None = None
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump((CACHE_MARK, CACHE_FORMAT, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, file)  # a reader never sees half a file
            if prune:
                self._prune(self.folder, MAX_ENTRIES)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            # the cache is an optimization: a read-only home or an unpicklable value is no error
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    @staticmethod
    def _prune(folder: Path, keep: int) -> None:
        """Remove the oldest entries beyond `keep`. Another process may prune at the same time,
        and an entry may be a link to nothing: a file gone or unreadable is skipped (a dangling
        link counts as oldest, and goes)."""
        dated = []
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if not entry.name.endswith(".pkl"):
                continue
            try:
                mtime = entry.stat().st_mtime  # follows a link
            except OSError:
                mtime = float("-inf")
            dated.append((mtime, entry.path))
        dated.sort()
        for _, path in dated[: max(0, len(dated) - keep)]:
            try:
                os.unlink(path)
            except OSError:
                pass
