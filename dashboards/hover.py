"""What the Timeline's hover says about an activity beyond its name: for a collective kernel its
collective, element counts, dtype, size in bytes, process group and sequence number; for a
compute kernel its input shapes (the last field of its signature, metrics.md §8).

Each distinct combination is formatted once and indexed back, so a step of a million activities
costs a few thousand string formats, not a million.
"""

from __future__ import annotations

import numpy as np

from tpscope.metrics.collectives import dtype_bytes
from tpscope.numbers import size_text
from tpscope.trace import ActivityClass, RankTrace


def _collective(
    r: RankTrace, coll: int, pg: int, dtype: int, n_in: int, n_out: int, size: int
) -> str:
    name = r.symbols[coll]
    text = f"{name} · in {n_in:,} / out {n_out:,} elements"
    if dtype >= 0:
        width = dtype_bytes(r.symbols[dtype])
        text += f" · {r.symbols[dtype]}"
        if width:
            text += f" · {size_text(max(n_in, n_out) * width)}"
    if pg >= 0:
        text += f" · group {r.symbols[pg]}"
    if size > 0:
        text += f" · {size} ranks"
    return text


def activity_info(r: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Per row of `r.gpu` in `rows`: the hover's second line ("" where there is nothing to add)."""
    g = r.gpu
    out = np.full(len(rows), "", dtype=object)
    if not len(rows):
        return out
    comm = g.coll_name_id[rows] >= 0
    if comm.any():
        cols = np.stack(
            [
                g.coll_name_id[rows][comm],
                g.pg_name_id[rows][comm],
                g.dtype_id[rows][comm],
                g.in_nelems[rows][comm],
                g.out_nelems[rows][comm],
                g.group_size[rows][comm],
            ],
            axis=1,
        )
        uniq, inverse = np.unique(cols, axis=0, return_inverse=True)
        # once per combination
        texts = np.array([_collective(r, *map(int, u)) for u in uniq], dtype=object)
        out[comm] = texts[inverse.ravel()]
    compute = ~comm & (g.cls[rows] == ActivityClass.COMPUTE) & (g.signature_id[rows] >= 0)
    if compute.any():
        sig, inverse = np.unique(g.signature_id[rows][compute], return_inverse=True)
        # once per signature
        texts = np.array([_shapes(r.symbols[s]) for s in sig.tolist()], dtype=object)
        out[compute] = texts[inverse.ravel()]
    return out


def _shapes(signature: str) -> str:
    """`name|grid=[..]|block=[..]|dims=[[1024, 4096], [4096, 7168]]` -> `inputs [[1024, 4096], [4096, 7168]]
    · grid [..] · block [..]` (the parts the signature holds)."""
    fields = dict(p.split("=", 1) for p in signature.split("|")[1:] if "=" in p)
    parts = [f"inputs {fields['dims']}" if fields.get("dims") else ""]
    parts += [f"{k} {fields[k]}" for k in ("grid", "block") if fields.get(k)]
    return " · ".join(p for p in parts if p)
