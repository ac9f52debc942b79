"""The view a URL or a click asks for: run, baseline, step, ranks, tab, zoom and selection.

The page writes its whole view into the URL (`assets/views.js`, in the browser) so that a link
reproduces it; `parse_view` reads such a query back. A click anywhere ("drill-down") is turned
into the same kind of request, so a click and a link land on the same view.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from tpscope.errors import UserError

TAB_NAMES = ("overview", "timeline", "breakdown", "collectives", "contention", "hta", "whatif")
SELECTION_KINDS = ("collective", "kernel", "gemm", "class", "search")
"""What a selection names: a collective instance (its JSON `key`), a kernel (its signature, as the
contention table names it), the GEMMs of one shape (its label, `1024×14336×8192 BFloat16`), a class
of activity (compute, comm, memory, filler), or the text a search looks for in activity names."""


def _one(query: dict, name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _number(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"URL: {name}={text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UserError(f"URL: {name}={text!r} is not a finite number")
    return value


def parse_view(search: str | None) -> dict:
    """The view a query string (`?run=...&step=3&ranks=0,1&tab=timeline&zoom=10,20&sel=...`) asks
    for, as a plain dict with only the keys it names; UserError (one line) for a malformed value.
    Run ids are checked by the store, not here."""
    query = parse_qs((search or "").lstrip("?"), keep_blank_values=True)
    view: dict = {}
    if _one(query, "run"):
        view["run"] = _one(query, "run")
    if _one(query, "baseline") is not None:
        view["baseline"] = _one(query, "baseline") or None
    if _one(query, "step"):
        step = _number(_one(query, "step"), "step")
        if step != int(step):
            raise UserError(f"URL: step={_one(query, 'step')!r} is not a step number")
        view["step"] = int(step)
    if _one(query, "ranks"):
        ranks = [_number(r, "ranks") for r in _one(query, "ranks").split(",") if r.strip()]
        view["ranks"] = sorted({int(r) for r in ranks})
    if _one(query, "tab"):
        tab = _one(query, "tab")
        if tab not in TAB_NAMES:
            raise UserError(f"URL: tab={tab!r} is none of {', '.join(TAB_NAMES)}")
        view["tab"] = tab
    if _one(query, "zoom"):
        parts = _one(query, "zoom").split(",")
        if len(parts) != 2:
            raise UserError("URL: zoom= needs two numbers, start and end in µs (zoom=120.5,380)")
        lo, hi = (_number(p, "zoom") for p in parts)
        if hi <= lo:
            raise UserError(f"URL: zoom={lo},{hi} ends before it starts")
        view["zoom"] = [lo, hi]
    if _one(query, "sel"):
        kind, _, key = _one(query, "sel").partition(":")
        if kind not in SELECTION_KINDS or not key:
            raise UserError(
                f"URL: sel= must be KIND:NAME with KIND one of {', '.join(SELECTION_KINDS)}"
            )
        view["sel"] = {"kind": kind, "key": key}
    return view


def pinned(view: dict, run_id: str, step: int | None) -> dict | None:
    """A zoom or selection store's value when it belongs to this run and step, else None."""
    if not view or view.get("run") != run_id or view.get("step") != step:
        return None
    return view
