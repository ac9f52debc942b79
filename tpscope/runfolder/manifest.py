"""The run folder's manifest, `tpscope_run.jsonc`, as one typed value (docs/runtime.md, "The run
folder").

`Manifest` names every field, its type and its order in the file; the table of what each field
must be is the `kind` of its dataclass field, checked once when a manifest is read. A field of the
wrong type is an error naming the file and the field (never a guess: a boolean is not a number of
tokens). Null is always allowed (unknown, never a made-up 0); a field the manifest lacks is null,
so older manifests read as they are. Fields this version does not know are kept in `extra`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpscope.errors import UserError
from tpscope.runfolder.layout import MANIFEST_NAME, manifest_path

SCHEMA_VERSION = 1
"""The manifest format this version writes; it reads this one and every older one."""


class ManifestError(UserError):
    """A manifest that cannot be read: the message names the file and the field."""


INT64_MAX = 2**63 - 1
FLOAT_MAX = 1.7976931348623157e308  # sys.float_info.max


def _in_range(v: object) -> bool:
    """False for a number no float or 64-bit integer holds (JSON allows any integer), also inside
    lists: a manifest number must survive becoming a float or an int64."""
    if isinstance(v, list):
        return all(_in_range(x) for x in v)
    if isinstance(v, dict):
        return all(_in_range(x) for x in v.values())
    if isinstance(v, int) and not isinstance(v, bool):
        return -INT64_MAX - 1 <= v <= INT64_MAX
    return True


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _float(v: object) -> bool:  # a loss may be NaN or inf: that is what the run measured
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _list_of(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, list) and all(test(x) for x in v)


# kind -> (test, what the message calls it)
KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "positive": (lambda v: _number(v) and v > 0, "a finite number > 0"),
    "number": (_number, "a finite number"),
    "count": (_count, "an integer >= 0"),
    "numbers": (_list_of(_number), "a list of finite numbers"),
    "floats": (_list_of(_float), "a list of numbers"),
    "counts": (_list_of(_count), "a list of integers >= 0"),
    "count_lists": (_list_of(_list_of(_number)), "a list of lists of finite numbers"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "texts": (_list_of(lambda x: isinstance(x, str)), "a list of strings"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "text_map": (
        lambda v: isinstance(v, dict) and all(isinstance(x, (str, int, float)) for x in v.values()),
        "an object of strings",
    ),
    "object": (lambda v: isinstance(v, dict), "an object"),
}


def _f(kind: str) -> Any:
    return field(default=None, metadata={"kind": kind})


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    """Every field of `tpscope_run.jsonc`, in the order the runtime writes them (None: unknown)."""

    schema_version: int | None = _f("count")
    tpscope_version: str | None = _f("text")
    complete: bool | None = _f("flag")  # false (with `stopped`: why) when a run did not finish
    stopped: str | None = _f("text")
    torch_version: str | None = _f("text")
    nccl_version: str | None = _f("text")
    python_version: str | None = _f("text")
    gpu_name: str | None = _f("text")
    gpu_count: int | None = _f("count")
    cuda_version: str | None = _f("text")
    cpu: str | None = _f("text")
    backend: str | None = _f("text")
    device: str | None = _f("text")
    collectives: Mapping[str, Any] | None = _f("object")
    regime: str | None = _f("text")
    regime_env: Mapping[str, str] | None = _f("text_map")
    nccl_env: Mapping[str, str] | None = _f("text_map")
    mode: str | None = _f("text")
    chunks: int | None = _f("count")
    sm_margin: int | None = _f("count")
    comm_ctas: int | None = _f("count")
    bwd_overlap: bool | None = _f("flag")
    ring_all_gather: bool | None = _f("flag")
    embed_overlap: bool | None = _f("flag")
    # layer -> FusionChoice fields
    fusion_by_layer: Mapping[str, Mapping[str, Any]] | None = _f("object")
    auto: Mapping[str, Any] | None = _f("object")
    tp: int | None = _f("count")
    world_size: int | None = _f("count")
    model: Mapping[str, int] | None = _f("object")
    param_count: int | None = _f("count")
    dtype: str | None = _f("text")
    seq_len: int | None = _f("count")
    batch: int | None = _f("count")
    tokens_per_step: int | None = _f("positive")
    steps: int | None = _f("count")
    lr: float | None = _f("number")
    warmup_steps: int | None = _f("count")
    decay_to: float | None = _f("number")
    grad_clip: float | None = _f("number")
    weight_decay: float | None = _f("number")
    optimizer: str | None = _f("text")
    data: str | None = _f("text")
    seed: int | None = _f("count")
    profiler: Mapping[str, Any] | None = _f("object")
    step_time_source: str | None = _f("text")
    step_times_ms: tuple[float, ...] | list[float] | None = _f("numbers")
    step_times_ms_by_rank: list[list[float]] | None = _f("count_lists")
    timed_steps: list[int] | None = _f("counts")
    median_step_time_ms: float | None = _f("positive")
    tokens_per_s: float | None = _f("positive")
    tokens_per_s_per_gpu: float | None = _f("positive")
    losses: list[float] | None = _f("floats")
    loss_trend: Mapping[str, Any] | None = _f("object")
    peak_memory_bytes: int | None = _f("count")
    peak_memory_bytes_by_rank: list[int] | None = _f("counts")
    peak_memory_kind: str | None = _f("text")
    command: list[str] | None = _f("texts")
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields this version does not know (a newer writer's): kept, written back as they were."""

    def to_dict(self) -> dict[str, Any]:
        """The manifest as the JSON object the file holds (known fields in order, then `extra`)."""
        out = {f.name: getattr(self, f.name) for f in FIELDS}
        return {**out, **self.extra}

    @property
    def finished(self) -> bool:
        """False only when the manifest says the run did not finish."""
        return self.complete is not False


FIELDS: tuple[dataclasses.Field, ...] = tuple(
    f for f in dataclasses.fields(Manifest) if f.name != "extra"
)
FIELD_NAMES: frozenset[str] = frozenset(f.name for f in FIELDS)


def manifest_from_dict(raw: object, where: str) -> Manifest:
    """The typed manifest of a JSON object; ManifestError (one line naming `where` and the
    field) when a field has the wrong type or the schema is newer than this version reads."""
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: not a JSON object")
    for f in FIELDS:
        value = raw.get(f.name)
        test, what = KINDS[f.metadata["kind"]]
        if value is not None and not _in_range(value):
            raise ManifestError(
                f"{where}: field {f.name} holds a number past the range of a float and of a "
                f"64-bit integer ({_short(repr(value))})"
            )
        if value is not None and not test(value):
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise ManifestError(f"{where}: field {f.name} must be {what}, not {shown}")
    version = raw.get("schema_version")
    if version is not None and version > SCHEMA_VERSION:
        raise ManifestError(
            f"{where}: schema_version {version} is newer than this tpscope reads "
            f"({SCHEMA_VERSION}); upgrade tpscope"
        )
    known = {k: v for k, v in raw.items() if k in FIELD_NAMES}
    extra = {k: v for k, v in raw.items() if k not in FIELD_NAMES}
    return Manifest(**known, extra=extra)


def read_manifest(folder: str | Path) -> Manifest | None:
    """The manifest of a run folder, None when it has none; ManifestError when it cannot be read."""
    path = manifest_path(folder)
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: not a readable manifest ({_one_line(exc)})") from None
    return manifest_from_bytes(data, str(path))


def manifest_from_bytes(data: bytes, where: str) -> Manifest:
    """The typed manifest of a file's bytes; ManifestError naming `where` when it cannot be read."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ManifestError(f"{where}: not a readable manifest ({_one_line(exc)})") from None
    return manifest_from_dict(raw, where)


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def write_manifest(out_dir: str | Path, manifest: Manifest) -> Path:
    """Write `tpscope_run.jsonc` (atomically: a reader never sees half a file)."""
    path = Path(out_dir) / MANIFEST_NAME
    tmp = path.with_suffix(".jsonc.tmp")
    tmp.write_text(json.dumps(manifest.to_dict(), indent=2) + "\n")
    tmp.replace(path)
    return path


def incomplete(
    manifest: Manifest | None, reason: str, version: str, command: list[str] | None
) -> Manifest:
    """`manifest` (or an empty one) marked as a run that did not finish, and why."""
    base = manifest or Manifest()
    return dataclasses.replace(
        base,
        schema_version=SCHEMA_VERSION,
        tpscope_version=version,
        complete=False,
        stopped=reason,
        command=base.command if base.command is not None else command,
    )
