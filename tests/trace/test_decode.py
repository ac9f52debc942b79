"""The one-piece decoder's run reader: `decode_run` grows a run cut inside an event."""

import json

import pytest

from tpscope.trace.read.decode import decode_run

EVENTS = [
    {"ph": "X", "name": "a", "ts": 1, "dur": 1},
    {"ph": "X", "name": "b", "ts": 2, "dur": 1, "args": {"parts": [{"k": 1}, {"k": 2}]}},
    {"ph": "X", "name": "c", "ts": 3, "dur": 1},
]


def _text(kind):
    body = ",\n  ".join(json.dumps(e, separators=(", ", ": ")) for e in EVENTS)
    text = ("[\n  " + body + "\n]").encode()
    return bytearray(text) if kind == "bytearray" else text


@pytest.mark.parametrize("kind", ["bytes", "bytearray"])
def test_a_run_cut_inside_an_event_grows_to_the_next_boundary(kind):
    text = _text(kind)
    before = bytes(text)
    lo, hi = text.index(b"{"), text.rindex(b"}") + 1
    inside = text.index(b"}, {", text.index(b'"parts"')) + 1  # the comma of a nested "}, {"
    got = decode_run(text, lo, inside, hi)
    assert got is not None
    events, stop = got
    assert [e.name for e in events] == ["a", "b"]  # the whole of event b, not a piece of it
    assert text[stop : stop + 1] == b"," and text.index(b'"c"') > stop > inside
    assert bytes(text) == before  # the brackets written in place are taken back


def test_a_run_at_a_real_boundary_is_read_as_it_is():
    text = _text("bytearray")
    lo, hi = text.index(b"{"), text.rindex(b"}") + 1
    first = text.index(b"},") + 1
    events, stop = decode_run(text, lo, first, hi)
    assert [e.name for e in events] == ["a"] and stop == first


def test_text_that_no_boundary_makes_valid_or_well_typed_gives_none():
    broken = b'[{"ph": "X", "name": "a", "ts": 1}, {"ph": "X", "name": "b", "ts": ]'
    assert decode_run(broken, 1, broken.index(b"},") + 1, len(broken) - 1) is not None
    assert decode_run(broken, 1, len(broken) - 1, len(broken) - 1) is None  # not JSON
    typed = b'[{"ph": "X", "name": "a", "ts": "late"}]'
    assert decode_run(typed, 1, len(typed) - 1, len(typed) - 1) is None  # ts is no number
