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
    assert parse_change("fuse=chunked").bwd_overlap
    f = parse_change("fuse=chunked:2:no-bwd@block1")
    assert (f.chunks, f.bwd_overlap, f.target) == (2, False, "block1")
    f = parse_change("fuse=copy_engine:no-bwd")
    assert (f.mode, f.chunks, f.bwd_overlap) == ("copy_engine", 4, False)
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
        "fuse=ring:",
        "fuse=ring:2:3",
        "fuse=ring:no-bwd:2",
        "fuse=ring:2:no-bwd:no-bwd",
        "hide=",
        "contention=on",
        "speed=2",
        "comm=2@",
        "comm=1e400",  # inf
        "link=50,1e999",
        "link=50,-3",
        "hide=all@tp",  # hide=all hides every group: a target would be ignored
    ],
)
def test_bad_change_names_itself(text):
    with pytest.raises(ChangeError, match=repr(text).replace("[", r"\[")):
        parse_change(text)


@pytest.mark.parametrize(
    "text, says",
    [("fuse=chunked:0", "CHUNKS a whole number >= 1"), ("link=50,-3", "LAT_US >= 0")],
)
def test_bad_change_says_which_part_is_wrong(text, says):
    with pytest.raises(ChangeError, match=says):
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


def test_contention_off_runs_an_overlapped_gemm_at_its_isolated_time(tmp_path):
    """Three isolated GEMMs of one shape take 100 µs each; a fourth beside a comm kernel on
    another stream [300, 460] takes 150 µs, then `b` [450, 500]. contention=off: the fourth takes
    100 µs, `b` runs [400, 450], and the step ends with the comm kernel at 460."""
    from tests.kineto import RankTrace, write_run
    from tpscope.metrics.whatif import predict, prepare
    from tpscope.trace import load_run

    dims, types = [[64, 32], [32, 48]], ["c10::BFloat16", "c10::BFloat16"]
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -100, 1000)
    for k in range(3):
        r.kernel("gemm", 100 * k, 100, launch_us=(-90 + k, 1), input_dims=dims, input_type=types)
    r.kernel("ncclDevKernel_AllGather", 300, 160, stream=20, launch_us=(-50, 1))
    r.kernel("gemm", 300, 150, launch_us=(-40, 1), input_dims=dims, input_type=types)
    r.kernel("b", 450, 50, launch_us=(-30, 1))
    w = predict(
        prepare(load_run(write_run(tmp_path / "run", [r]))), [parse_change("contention=off")]
    )
    assert w.measured_steps_us == pytest.approx([500])
    assert w.changes[0].step_us == pytest.approx([460])


@pytest.mark.parametrize(
    "label, target, holds",
    [
        ("3 [0,1] mesh_tp", "mesh_tp", True),
        ("3 [0,1] mesh_tp", "TP", True),  # a text of the description, any case
        ("3 [0,1] mesh_tp", "3", True),  # the pg name
        ("3 [0,1] mesh_tp", "[0,1]", True),
        ("3 [0,1] mesh_tp", "1", False),  # not pg 1 for holding rank 1
        ("3 [0,1] mesh_tp", "0", False),
        ("0 [0,1]", "0", True),
        ("0 [0,1]", "default", False),
        ("0 [0,1] default_pg", "default", True),
        ("", "0", False),
    ],
)
def test_a_group_target_is_a_name_ranks_or_a_text_of_the_description(label, target, holds):
    from tpscope.metrics.whatif_changes import label_holds

    assert label_holds(label, target) is holds
