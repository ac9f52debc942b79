"""Text from traces made safe for where it is shown.

Kernel names, file names and other strings from a trace are data: written raw to a terminal, an
escape sequence in one retitles the window or clears the screen; in Markdown a backtick or a pipe
breaks the table and `<...>` becomes HTML. Here they become visible, inert text.
"""

from __future__ import annotations

import re

# C0 controls (ESC, BEL, CR, backspace...), DEL and the C1 controls (CSI is U+009B): never shown raw
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROLS_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _escape(m: re.Match) -> str:
    return f"\\x{ord(m.group()):02x}"


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with every control character written as `\\xNN` (a newline kept if asked), and
    what UTF-8 cannot encode as `displayable` writes it."""
    return displayable((_CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS).sub(_escape, text))


# lone surrogates: the undecodable bytes of a file name (os.fsdecode's surrogateescape), U+DC80-DCFF
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def _escape_surrogate(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def displayable(text: str) -> str:
    """`text` that UTF-8 can encode: a byte a file name held that is not UTF-8 (`b"run\\xff"`,
    which Python reads as a lone surrogate) written as `\\xNN`, another lone surrogate as
    `\\uXXXX`."""
    return _SURROGATES.sub(_escape_surrogate, text)


def md_code(text: str) -> str:
    """A Markdown code span holding `text` literally, whatever backticks it contains."""
    text = printable(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_text(text: str) -> str:
    """Plain Markdown text: controls written out, and `<`, `>`, `&`, backticks as entities so that
    nothing in it becomes HTML or code."""
    text = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("`", "&#96;")


def plotly_text(text: str) -> str:
    """Text plotly.js draws as itself: it reads labels, hovers and legends as a subset of HTML
    (`<a href>`, `<b>`, `<br>`) and turns entities back into characters, so `&`, `<`, `>` become
    entities; controls are written out."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# a trace's data plotly.js draws as text (its templates, `hovertemplate`, are ours and kept)
_DRAWN = ("x", "y", "z", "text", "hovertext", "customdata", "labels", "name", "legendgroup")


def _escaped(value, memo: dict):
    """(`value` with its strings escaped, whether any changed)."""
    if isinstance(value, str):
        if value not in memo:
            memo[value] = plotly_text(value)
        return memo[value], memo[value] != value
    if getattr(value, "dtype", None) is not None:  # a numpy array: only strings are text
        if value.dtype.kind not in "OUS":
            return value, False
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        pairs = [_escaped(v, memo) for v in value]
        if any(changed for _, changed in pairs):
            return [v for v, _ in pairs], True
    return value, False


def escape_figure(fig):
    """Escape, in place, every string of a plotly figure's traces, tick labels and annotations with
    `plotly_text` (names from traces and manifests are data, never markup); `fig` returned."""
    memo: dict[str, str] = {}
    for trace in fig.data:
        for attr in _DRAWN:
            old = getattr(trace, attr, None) if attr in trace else None
            if old is None:
                continue
            new, changed = _escaped(old, memo)
            if changed:
                trace[attr] = new

    def ticks(axis) -> None:
        if axis.ticktext is not None:
            new, changed = _escaped(axis.ticktext, memo)
            if changed:
                axis.ticktext = new

    fig.for_each_xaxis(ticks)
    fig.for_each_yaxis(ticks)
    for note in fig.layout.annotations or ():  # a message naming a file or a run
        if isinstance(note.text, str):
            note.text = _escaped(note.text, memo)[0]
    return fig
