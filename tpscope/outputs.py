"""Checks on the paths a command writes to (`--out`), so that a bad one is one line, exit 2,
before any work is done, and a failed write names the file."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tpscope.errors import UserError
from tpscope.text import displayable


def add_out_options(parser, file_name: str, what: str = "the JSON document") -> None:
    """`--out DIR` and `--overwrite`, as every command that writes one file spells them: `--out` a
    folder the command writes `file_name` into."""
    parser.add_argument(
        "--out",
        metavar="DIR",
        help=f"folder to write {what} into, as DIR/{file_name} (made when missing)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace an existing {file_name} in --out"
    )


def file_in_the_way(path: Path) -> Path | None:
    """The nearest of `path` and its ancestors that exists and is not a folder (a path under a file)."""
    for p in (path, *path.parents):
        try:
            if p.exists():
                return None if p.is_dir() else p
        except OSError:  # a symlink loop, a name too long
            return p
    return None


def check_out_file(path: Path, overwrite: bool, option: str = "--out") -> None:
    """A file to write: not a folder, in a folder that exists, not replaced without `overwrite`."""
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file name")
    blocker = file_in_the_way(path.parent)
    if blocker is not None:
        raise UserError(f"{option} {path}: {blocker} is a file, not a folder")
    if not path.parent.is_dir():
        raise UserError(f"{option} {path}: folder {path.parent} does not exist")
    if path.exists() and not overwrite:
        raise UserError(f"{option} {path}: already exists; pass --overwrite to replace it")


def check_out_folder(path: Path, option: str = "--out") -> None:
    """A folder to write into (made with its parents when missing): not a file, not under one."""
    blocker = file_in_the_way(path)
    if blocker == path:
        raise UserError(f"{option} {path}: exists and is not a folder")
    if blocker is not None:
        raise UserError(f"{option} {path}: {blocker} is a file, not a folder")


def out_file_in_folder(folder: Path, name: str, overwrite: bool, option: str = "--out") -> Path:
    """`--out DIR` of a command that writes one file, `name`, into DIR (every command's `--out` is
    a folder): DIR / name, checked before any work is done. A path ending in `.json` that is not
    a folder is refused with the folder form, as is an existing `name` without `overwrite`."""
    if folder.suffix == ".json" and not folder.is_dir():
        raise UserError(
            f"{option} {folder}: names the folder to write {name} into, not a .json file "
            f"(e.g. {option} {folder.parent})"
        )
    check_out_folder(folder, option)
    path = folder / name
    if path.exists() and not overwrite:
        raise UserError(
            f"{option} {folder}: {name} already exists there; pass --overwrite to replace it"
        )
    return path


def write_into_folder(path: Path, text: str, option: str = "--out") -> None:
    """Write `text` to `path` (from out_file_in_folder), making its folder first, atomically."""
    make_folder(path.parent, option)
    write_text(path, text, option)


def check_not_inside(out: Path, runs: list, option: str = "--out") -> None:
    """Refuse an output at or under a run folder being analysed: it would be read back as one of
    the run's files by every later analysis."""
    target = Path(os.path.abspath(out))
    for run in runs:
        if run is None or "://" in str(run):
            continue
        try:
            folder = Path(os.path.realpath(run))
            if not folder.is_dir():
                continue
            where = Path(os.path.realpath(target.parent)) / target.name
        except (OSError, ValueError):
            continue
        if where == folder or folder in where.parents:
            raise UserError(
                f"{option} {out}: inside the run folder {run}; write the report elsewhere"
            )


def encodable(text: str) -> str:
    """`text` as UTF-8 can write it (a file name's undecodable bytes as `\\xNN`)."""
    if text.isascii():  # known without reading it: the usual JSON document
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return displayable(text)
    return text


def write_text(path: Path, text: str, option: str = "--out") -> None:
    """Write `text` to `path` atomically: a temporary file in the same folder, renamed over `path`
    once complete, so a failed write leaves the previous file as it was and no partial one. An OS
    refusal (permissions, a full disk, the file-size limit) is the user's one line."""
    data = encodable(text).encode("utf-8")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would make it; mkstemp's 0600 hides it
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_stdout(text: str) -> None:
    """`text` to standard output, what its encoding cannot write escaped."""
    sys.stdout.write(encodable(text))


def make_folder(path: Path, option: str = "--out") -> None:
    """mkdir -p `path`; an OS refusal is the user's one line."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot be made ({exc.strerror or exc})") from None


def replace_folder(
    path: Path, files: dict[str, str], overwrite: bool, ours, option: str = "--out"
) -> None:
    """Write `files` ({name: text}) as the folder `path`, atomically: into a new folder beside it,
    then renamed into place, so a reader never sees half an output. An existing `path` is replaced
    only with `overwrite`, and only when it is empty or every file in it passes `ours(file)` (an
    output of the same command): a folder holding anything else is never touched."""
    import os
    import shutil

    check_out_folder(path.parent, option)
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path}: exists and is not a folder")
    held = sorted(path.iterdir()) if path.is_dir() else []
    if held and not overwrite:
        raise UserError(f"{option} {path}: already exists; pass --overwrite to replace it")
    if held and not all(p.is_file() and ours(p) for p in held):
        other = next(p for p in held if not (p.is_file() and ours(p)))
        raise UserError(
            f"{option} {path}: holds {other.name}, not an output of this command; "
            "choose another folder"
        )
    make_folder(path.parent, option)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    old = path.parent / f".{path.name}.old-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if path.exists():
            path.rename(old)
        tmp.rename(path)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not path.exists():
            old.rename(path)
        raise UserError(f"{option} {path}: cannot be written ({exc.strerror or exc})") from None
    shutil.rmtree(old, ignore_errors=True)
