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
