"""The one event-boundary rule (`read/cut.py`), on texts whose boundaries are known by hand."""

import json

import pytest

from tpscope.trace.read import cut

EVENTS = [{"ph": "X", "name": "a}, {b", "args": {"l": [{"x": 1}, {"y": 2}]}}, {"ph": "M"}, {}]


@pytest.mark.parametrize(
    "separators", [(", ", ": "), (",", ":"), (",\n  ", ": ")], ids=["json", "compact", "kineto"]
)
def test_every_layout_is_cut_at_its_event_boundaries_only_by_a_valid_cut(separators):
    text = json.dumps(EVENTS, separators=separators).encode()
    inner = (1, len(text) - 1)
    # the commas between the three events, found by writing the events one by one
    firsts = [json.dumps(e, separators=separators).encode() for e in EVENTS]
    sep = separators[0].encode()
    commas = [1 + len(firsts[0]), 1 + len(firsts[0]) + len(sep) + len(firsts[1])]
    assert text[commas[0]] == text[commas[1]] == ord(",")
    found = []
    at = cut.first_cut(text, *inner)
    while at >= 0:
        found.append(at)
        at = cut.first_cut(text, at + 1, inner[1])
    # the rule also matches inside the name's string and the nested list: those cuts give
    # invalid JSON on their left, which is how a reader tells them apart
    assert set(commas) <= set(found)
    for at in found:
        left_valid = _valid(b"[" + text[1:at] + b"]")
        assert left_valid == (at in commas), at
    assert cut.last_cut(text, *inner) == commas[-1]


def test_spans_cover_the_text_without_the_commas_between():
    text = json.dumps([{"k": i} for i in range(100)]).encode()
    spans = cut.spans(text, 1, len(text) - 1, 4)
    assert len(spans) == 4 and spans[0][0] == 1 and spans[-1][1] == len(text) - 1
    for (_, hi), (lo, _) in zip(spans, spans[1:]):
        assert text[hi] == ord(",") and lo == hi + 1
    events = [e for lo, hi in spans for e in json.loads(b"[" + text[lo:hi] + b"]")]
    assert events == [{"k": i} for i in range(100)]


def test_no_boundary_no_cut():
    text = b'[{"a": [1, 2, 3]}]'
    assert cut.first_cut(text, 1, len(text) - 1) == cut.last_cut(text, 1, len(text) - 1) == -1
    assert cut.spans(text, 1, len(text) - 1, 3) == [(1, len(text) - 1)]


def _valid(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
