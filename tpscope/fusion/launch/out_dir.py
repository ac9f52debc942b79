"""The run folder a `tpscope run` writes into: refused when another run holds it or (without
--overwrite) when it holds an earlier run; held by an flock until the run ends; marked incomplete
in its manifest when the run does not finish (docs/runtime.md, "The run folder")."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tpscope.errors import UserError
from tpscope.outputs import check_out_folder, make_folder
from tpscope.runfolder.layout import LOCK_NAME, RUN_ARTIFACTS, manifest_path
from tpscope.runfolder.manifest import ManifestError, incomplete, manifest_from_dict, write_manifest


def prepare_out_dir(out_dir: str, overwrite: bool, *, clear: bool = True) -> Path:
    """Refuse an existing non-empty folder unless `overwrite`; with it, remove the traces and
    manifest of the earlier run (only those: other files stay) so that runs never mix."""
    path = Path(out_dir)
    check_out_folder(path)
    if path.is_dir() and any(p.name != LOCK_NAME for p in path.iterdir()):
        if not overwrite:
            raise UserError(
                f"{path}: folder exists and is not empty (pass --overwrite to replace the run in it)"
            )
        if clear:
            for pattern in RUN_ARTIFACTS:
                for old in path.glob(pattern):
                    old.unlink()
            for sub in path.glob("plugins"):
                shutil.rmtree(sub, ignore_errors=True)
    make_folder(path)
    return path


@dataclass
class OutDirClaim:
    """A run folder this process holds (an flock on its lock file) until `release`."""

    path: Path
    fd: int

    def release(self) -> None:
        lock = self.path / LOCK_NAME
        try:
            if os.stat(lock).st_ino == os.fstat(self.fd).st_ino:
                lock.unlink()  # still held: no other run can take it between the unlink and the close
        except OSError:
            pass
        os.close(self.fd)


def claim_out_dir(out_dir: str, overwrite: bool) -> OutDirClaim:
    """Hold `out_dir` for this run: refuse, in one line, a folder another running `tpscope run`
    holds (two runs started together get one each, never both), then `prepare_out_dir`. The
    hold ends with `release`, or with this process however it ends (the kernel drops the flock)."""
    path = Path(out_dir)
    check_out_folder(path)
    make_folder(path)
    lock = path / LOCK_NAME
    for _ in range(10):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise UserError(
                f"--out {path}: another tpscope run (pid {holder}) is writing into this folder"
            ) from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a lock file its holder removed while we opened it
            break
        os.close(fd)
    else:
        raise UserError(f"--out {path}: could not take the folder's lock file {LOCK_NAME}")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    claim = OutDirClaim(path, fd)
    try:
        prepare_out_dir(out_dir, overwrite)
    except BaseException:
        claim.release()
        raise
    return claim


def held_by_a_run(path: Path) -> bool:
    """Whether a running `tpscope run` holds `path` (an flock on its lock file)."""
    try:
        fd = os.open(path / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops a shared lock taken just now
    return False


def join_out_dir(out_dir: str, overwrite: bool) -> Path:
    """The run folder as a launcher of node rank > 0 takes it: it holds no lock (node 0 does) and
    clears nothing, but refuses, as node 0 would, a non-empty folder that no running launcher
    holds (an earlier run's, whose traces would mix with this one's) unless `overwrite`."""
    path = Path(out_dir)
    check_out_folder(path)
    if (
        not overwrite
        and path.is_dir()
        and any(p.name != LOCK_NAME for p in path.iterdir())
        and not held_by_a_run(path)
    ):
        raise UserError(
            f"{path}: folder exists and is not empty (pass --overwrite to replace the run in it)"
        )
    make_folder(path)
    return path


def unique_out_dir(parent: str, stem: str) -> str:
    """`parent/stem`, or `stem-2`, `stem-3`, ...: the first name that this call creates (mkdir is
    atomic), so two runs started in the same second never share a folder."""
    make_folder(Path(parent), option="--out (default)")
    for n in range(1, 10_000):
        name = os.path.join(parent, stem if n == 1 else f"{stem}-{n}")
        try:
            os.mkdir(name)
            return name
        except FileExistsError:
            continue
    raise UserError(f"{parent}: no free run folder name for {stem}; pass --out")


def mark_incomplete(out_dir: str | Path, reason: str, command: list[str] | None = None) -> None:
    """Record in the run folder's manifest that the run did not finish: `complete: false` and why.
    A manifest of a finished run is left as it is; else a minimal one is written (atomically)."""
    path = manifest_path(out_dir)
    try:
        manifest = manifest_from_dict(json.loads(path.read_text()), str(path))
    except (OSError, ValueError, ManifestError):
        manifest = None
    if manifest is not None and manifest.complete is True:
        return
    from tpscope import __version__

    try:
        write_manifest(out_dir, incomplete(manifest, reason, __version__, command))
    except OSError:
        pass  # the folder went away: nothing left to mark
