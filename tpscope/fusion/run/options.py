"""The options of `tpscope run` and `sweep`, one per field of RunConfig (and of its model and its
fusion): a field is spelled once, and its option follows from it.

- the flag is the field's name (`seq_len` -> `--seq-len`; a bool that defaults to True is turned
  off by `--no-NAME`, one that defaults to False turned on by `--NAME`);
- the help is the first paragraph of the field's docstring (`{name}` there is another field's
  default), then the default; a `--no-NAME` flag's help is "turn off" and the docstring's;
- the default is the field's in RunConfig's defaults (its model's, its fusion's).

A field's `metadata={"cli": {...}}` says what the field alone cannot: another `flag`, a `group`
(of GROUPS), `choices`, a `metavar`, or `unset` (the option's default is None, and this text says
what then happens). `{"cli": False}` marks a field that is no option. No torch here.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any

GROUPS = {"resources": "fusion resources (docs/runtime.md)", "model": "model"}
"""The titles of the option groups a field's metadata names."""
TYPES = {"int": int, "float": float, "str": str, "int | None": int}
"""A field's annotation -> what its option's value is parsed with (bools are flags)."""


@dataclass(frozen=True)
class FieldOption:
    """The option of one field."""

    path: str
    """The field from RunConfig: `steps`, `model.layers`, `fusion.sm_margin`."""
    flag: str
    dest: str
    """The attribute of the parsed options that holds it."""
    default: Any
    help: str
    group: str | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    kind: type | None = None
    """What the value is parsed with; None for a flag."""

    @property
    def name(self) -> str:
        """The field's own name (the last part of its path)."""
        return self.path.rsplit(".", 1)[-1]


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


@cache
def field_docs(cls: type) -> dict[str, str]:
    """{field name: its docstring} of a dataclass, read from its module's source (Python keeps no
    attribute docstrings)."""
    source = Path(sys.modules[cls.__module__].__file__).read_text(encoding="utf-8")
    (node,) = [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.ClassDef) and n.name == cls.__name__
    ]
    docs = {}
    for statement, following in zip(node.body, node.body[1:]):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = following.value.value
    return docs


def _help_text(doc: str, defaults: dict[str, Any]) -> str:
    """A docstring's first paragraph as help: one line, lower-case first word (unless an acronym
    or a name), no closing full stop, `{name}` replaced by that field's default."""
    text = " ".join(doc.strip().split("\n\n", 1)[0].split())
    first = text.split(" ", 1)[0]
    if first[:1].isupper() and first[1:].islower():
        text = text[0].lower() + text[1:]
    return text.removesuffix(".").format_map(defaults).replace("%", "%%")


def _with_default(text: str, default_text: str) -> str:
    """`text (default ...)`, or inside the closing parenthesis that ends it."""
    if text.endswith(")"):
        return f"{text[:-1]}; {default_text})"
    return f"{text} ({default_text})"


def _walk(cls: type, defaults: Any, prefix: str = "") -> Iterator[tuple[str, Field, Any]]:
    """(path, field, default) of every leaf field of cls, through the fields that hold dataclasses."""
    for f in fields(cls):
        default = getattr(defaults, f.name, None) if defaults is not None else _default(f)
        if f.metadata.get("cli") is False:
            continue
        if is_dataclass(default):
            yield from _walk(type(default), default, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f, default


@cache
def field_options(cls: type) -> tuple[FieldOption, ...]:
    """The options of cls's fields, in their order (nested dataclasses in place)."""
    leaves = list(_walk(cls, None))
    flat_defaults = {path.rsplit(".", 1)[-1]: default for path, _, default in leaves}
    for f in fields(cls):  # fields that are no option can still be named in a help
        flat_defaults.setdefault(f.name, _default(f))
    out = []
    for path, f, default in leaves:
        owner = _owner(cls, path)
        meta = dict(f.metadata.get("cli") or {})
        text = _help_text(field_docs(owner).get(f.name, ""), flat_defaults)
        kind = None if isinstance(default, bool) and "unset" not in meta else TYPES[f.type]
        if kind is None:
            flag = meta.get("flag") or ("--no-" if default else "--") + f.name.replace("_", "-")
            if default:
                text = f"turn off {text}"
        else:
            flag = meta.get("flag") or "--" + f.name.replace("_", "-")
            if "unset" in meta:
                default = None
                unset = meta["unset"].format_map(flat_defaults)
                text = _with_default(text, f"default: {unset}")
            elif "default" not in text:
                text = _with_default(text, "default %(default)s")
        dest = f.name if flag.startswith("--no-") else flag[2:].replace("-", "_")
        out.append(
            FieldOption(
                path=path,
                flag=flag,
                dest=dest,
                default=default,
                help=text,
                group=GROUPS[meta["group"]] if "group" in meta else None,
                choices=tuple(meta["choices"]) if "choices" in meta else None,
                metavar=meta.get("metavar"),
                kind=kind,
            )
        )
    return tuple(out)


def _owner(cls: type, path: str) -> type:
    """The dataclass that declares the field at `path`."""
    owner, defaults = cls, None
    for part in path.split(".")[:-1]:
        (f,) = [f for f in fields(owner) if f.name == part]
        defaults = getattr(defaults, part) if defaults is not None else _default(f)
        owner = type(defaults)
    return owner


def add_field_options(
    parser: argparse.ArgumentParser, cls: type, skip: frozenset[str] = frozenset()
) -> None:
    """The options of cls's fields (but those whose path is in `skip`), grouped as their metadata says."""
    groups: dict[str, Any] = {}
    for opt in field_options(cls):
        if opt.path in skip:
            continue
        where = parser
        if opt.group:
            where = groups.get(opt.group) or groups.setdefault(
                opt.group, parser.add_argument_group(opt.group)
            )
        kwargs: dict[str, Any] = {"dest": opt.dest, "default": opt.default, "help": opt.help}
        if opt.kind is None:
            kwargs["action"] = "store_false" if opt.default else "store_true"
        else:
            kwargs["type"] = opt.kind
            if opt.choices:
                kwargs["choices"] = opt.choices
            if opt.metavar:
                kwargs["metavar"] = opt.metavar
        where.add_argument(opt.flag, **kwargs)


def option_values(args: argparse.Namespace, cls: type, prefix: str) -> dict[str, Any]:
    """{field name: parsed value} of the fields of cls's part at `prefix` (`model.`, `fusion.`,
    or '' for cls's own fields) that are options of `args`."""
    return {
        opt.name: getattr(args, opt.dest)
        for opt in field_options(cls)
        if opt.path == prefix + opt.name and hasattr(args, opt.dest)
    }


def flag_of_field(cls: type) -> dict[str, str]:
    """{field name: its flag}, so that a refusal naming a field names the option."""
    return {opt.name: opt.flag for opt in field_options(cls)}
