"""metrics.md §11: CHANGE parsing, the α-β fit on transfers made from a known α and β."""

from __future__ import annotations

import numpy as np
import pytest

from tpscope.metrics.whatif_changes import ChangeError, Comm, fit_alpha_beta, parse_change


def test_parse_each_change():
    c = parse_change("link=50,8@tp")
    assert (c.kind, c.gbps, c.lat_us, c.target) == ("link", 50.0, 8.0, "tp")
    assert parse_change("comm=0.5@all_gather").factor == 0.5
    assert parse_change("hide=all").target is None
    f = parse_change("fuse=ring:2@block0")
    assert (f.mode, f.chunks, f.target) == ("ring", 2, "block0")
    assert parse_change("fuse=chunked").chunks == 4
    assert parse_change("contention=off").kind == "contention"


@pytest.mark.parametrize(
    "text",
    [
        "comm=-1",
        "comm=x",
        "link=0",
        "link=5,6,7",
        "fuse=magic:2",
        "fuse=ring:0",
        "hide=",
        "contention=on",
        "speed=2",
        "comm=2@",
    ],
)
def test_bad_change_names_itself(text):
    with pytest.raises(ChangeError, match=repr(text).replace("[", r"\[")):
        parse_change(text)


def test_alpha_beta_fit_recovers_a_known_link():
    """Transfers made as 8 µs + bytes·f / 50 GB/s (f = 1/2) are fitted back exactly."""
    nbytes = np.array([1e6, 4e6, 16e6, 64e6])
    factor = np.full(4, 0.5)
    span_ns = 8000 + nbytes * factor / 50.0
    comm = Comm(
        np.zeros(0, object), np.zeros(0, object), ["all_gather"] * 4, [""] * 4, nbytes, factor
    )
    fit = fit_alpha_beta(comm, span_ns)["all_gather"]
    assert fit.alpha_us == pytest.approx(8.0)
    assert fit.beta_gbps == pytest.approx(50.0)
    assert fit.residual == pytest.approx(0.0, abs=1e-9)
