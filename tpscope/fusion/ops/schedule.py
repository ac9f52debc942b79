"""How the chunked and ring modes cut a rank's rows into pieces (no torch: pure arithmetic).

Even pieces by default. With a taper, the piece whose GEMM nothing hides is half an even one and
the others share the rest: the AG-GEMM's last piece (its GEMM runs after the last transfer) or
the GEMM-RS's first (its GEMM runs before the first transfer). Pieces other than the tapered one
are whole multiples of 64 rows when the rows allow it (cuBLAS tiles), the remainder going to the
piece farthest from the tapered one.
"""

from __future__ import annotations

TAPERS = ("", "first", "last")
"""No taper, a short first piece (GEMM-RS), a short last piece (AG-GEMM)."""

GRANULE = 64
"""Rows that the untapered pieces are whole multiples of, where the rows allow it."""


def chunk_bounds(rows: int, chunks: int, taper: str = "") -> tuple[tuple[int, int], ...]:
    """`chunks` consecutive (start, stop) row ranges covering `rows`, every one non-empty."""
    if taper not in TAPERS:
        raise ValueError(f"taper must be one of {TAPERS}, not {taper!r}")
    if chunks < 1 or rows < chunks:
        raise ValueError(f"cannot cut {rows} rows into {chunks} non-empty pieces")
    if not taper or chunks == 1:
        sizes = [rows // chunks] * chunks
        sizes[0] += rows - sum(sizes)
    else:
        even = rows // chunks
        small = max(1, even // 2)
        granule = GRANULE if rows >= 2 * GRANULE * chunks else 1
        rest = rows - small
        base = max(1, rest // (chunks - 1) // granule * granule)
        others = [base] * (chunks - 1)
        others[0] += rest - base * (chunks - 1)  # the piece farthest from the tapered one
        sizes = [small, *others[::-1]] if taper == "first" else [*others, small]
    bounds, start = [], 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    return tuple(bounds)
