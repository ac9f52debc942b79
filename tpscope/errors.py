"""Errors a user can cause: the CLI prints their one line and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user gave us (a path, a file, an option); message is one line."""


class TraceError(UserError):
    """A trace file that cannot be read; the message names the file and what is wrong."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):  # cross process boundaries (the loader's worker pool) intact
        return (type(self), (self.path, self.problem))
