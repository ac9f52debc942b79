"""Every real trace of the corpus loads, or is refused with one line."""

from pathlib import Path

import pytest

from tpscope.errors import UserError
from tpscope.trace import load_rank_file

DATA = Path(__file__).resolve().parent.parent / "data"
FILES = sorted(p for p in DATA.rglob("*") if p.is_file() and p.name.endswith((".json", ".gz")))


def test_the_corpus_is_there():
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(DATA)) for p in FILES])
def test_loads_or_refuses_with_one_line(path):
    try:
        rank = load_rank_file(path)
    except UserError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        return
    assert rank.rank >= 0
    g = rank.gpu
    assert (g.end_ns >= g.start_ns).all()
    assert (g.start_ns[1:] >= g.start_ns[:-1]).all()  # sorted by start
    assert len(rank.steps.step) == len(set(rank.steps.step.tolist()))


def test_execution_trace_is_refused():
    with pytest.raises(UserError, match="no trace events"):
        load_rank_file(DATA / "hta/execution_trace/benchmark_simple_add_et.json.gz")
