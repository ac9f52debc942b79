"""The bench's problem shapes (docs/benchmarks.md), importable without torch so that the CLI checks
`--shape` before starting anything."""

from __future__ import annotations

SHAPES: dict[str, tuple[int, int, int]] = {
    "ref": (8192, 8192, 28672),  # 70B-class MLP at TP=2 (docs/benchmarks.md reference shape)
    "s4096": (4096, 8192, 28672),
    "s16384": (16384, 8192, 28672),
    "8b": (8192, 4096, 14336),  # 8B-class MLP
    "small": (256, 128, 512),  # CPU smoke and tests
}


def parse_shape(name: str) -> tuple[int, int, int]:
    """A preset name or 'S,H,F' (tokens, hidden, ffn)."""
    if name in SHAPES:
        return SHAPES[name]
    try:
        s, h, f = (int(v) for v in name.split(","))
    except ValueError:
        raise ValueError(f"shape {name!r}: use one of {', '.join(SHAPES)} or S,H,F") from None
    if min(s, h, f) < 1:
        raise ValueError(f"shape {name!r}: S, H and F must be >= 1")
    return s, h, f
