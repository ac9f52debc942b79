"""Checks on the paths a command writes to (`--out`), so that a bad one is one line, exit 2,
before any work is done, and a failed write names the file."""

from __future__ import annotations

from pathlib import Path

from tpscope.errors import UserError


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


def write_text(path: Path, text: str, option: str = "--out") -> None:
    """Write `text` to `path`; an OS refusal (permissions, a full disk) is the user's one line."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot be written ({exc.strerror or exc})") from None


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
