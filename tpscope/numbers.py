"""How a number prints for a person: durations, shares, byte counts, rates and counts, in the
terminal, the reports (Markdown, JUnit, HTML), the dashboard and the analyzer's warnings.

One rule per kind of number, in one table; the JSON documents carry the numbers themselves
(metrics.md §10). The dashboard's grid formats bytes in the browser by the same rule as
`size_text` (`dashboards/assets/dashAgGridFunctions.js`, `formatBytes`).
"""

from __future__ import annotations

import math

MISSING = "-"

# unit -> (scale, format spec, unit text). "ratio" prints as a percentage (signed: percentage
# points); "count" is a whole number with thousands separators.
_UNITS: dict[str, tuple[float, str, str]] = {
    "us": (1.0, ",.1f", " µs"),
    "ratio": (100.0, ".1f", "%"),
    "bytes": (1.0 / (1 << 30), ".2f", " GiB"),
    "tokens/s": (1.0, ",.0f", ""),
    "count": (1.0, ",.0f", ""),
    "x": (1.0, ".3f", ""),
    "fraction": (1.0, ".2f", ""),
}
_OTHER = (1.0, ",.1f", "")  # "gbps", "number" and anything else
_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def number(
    value: float | None,
    unit: str = "us",
    *,
    signed: bool = False,
    with_unit: bool = True,
    missing: str = MISSING,
) -> str:
    """`value` in `unit`: µs with one decimal, ratios as percentages (signed: percentage points),
    "relative" (a change as a share of the baseline) as a signed percentage, bytes in GiB, tokens/s
    and counts whole, factors ("x") with three decimals, fractions (a share written 0.43) with two,
    bandwidths ("gbps") with one decimal, or three significant digits below 1 GB/s, anything else
    with one decimal; `missing`
    when unknown. `with_unit=False` leaves the unit out where a column's name says it."""
    if value is None:
        return missing
    sign = "+" if signed else ""
    if unit == "relative":
        return f"{value * 100:+.1f}%"
    if unit == "gbps" and 0 < abs(value) < 1:
        # a slow link (gloo on a CPU run) keeps three significant digits, never a false "0.0"
        decimals = 2 - math.floor(math.log10(abs(value)))
        return f"{value:{sign}.{decimals}f}"
    scale, spec, text = _UNITS.get(unit, _OTHER)
    if unit == "ratio":
        return f"{value * scale:{sign}{spec}}" + (" pp" if signed else text)
    return f"{value * scale:{sign}{spec}}" + (text if with_unit else "")


def size_text(nbytes: int) -> str:
    """A byte count in binary units, the value as short as it is exact: 8388608 -> '8 MiB',
    1536 -> '1.5 KiB', 100 -> '100 B'."""
    for unit, scale in _BINARY:
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"
