"""`beside.at_once`: two pieces of work, the second in a thread of its own when asked."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tpscope.trace.beside import at_once, threads_for


def test_with_one_thread_both_run_here_in_order():
    order = []

    def here():
        order.append(("here", threading.get_ident()))
        return 1

    def beside():
        order.append(("beside", threading.get_ident()))
        return 2

    assert at_once(here, beside, 1) == (1, 2)
    me = threading.get_ident()
    assert order == [("here", me), ("beside", me)]


def test_with_two_threads_both_run_at_once_and_the_thread_has_ended():
    """Each waits for the other to begin (a barrier that only two running at once can pass)."""
    barrier = threading.Barrier(2, timeout=10)
    who = {}
    before = threading.active_count()

    def here():
        barrier.wait()
        who["here"] = threading.get_ident()
        return np.sort(np.arange(10)[::-1])

    def beside():
        barrier.wait()
        who["beside"] = threading.get_ident()
        return "done"

    sorted_, word = at_once(here, beside, 2)
    assert sorted_.tolist() == list(range(10)) and word == "done"
    assert who["here"] == threading.get_ident() != who["beside"]
    assert threading.active_count() == before


def test_an_error_beside_is_raised_here_once_both_have_ended():
    ran = []

    def beside():
        raise ValueError("beside failed")

    with pytest.raises(ValueError, match="beside failed"):
        at_once(lambda: ran.append("here"), beside, 2)
    assert ran == ["here"]


def test_an_error_here_waits_for_the_thread_and_wins():
    finished = []
    started = threading.Event()

    def here():
        started.wait(10)
        raise KeyError("here failed")

    def beside():
        started.set()
        finished.append(True)
        raise ValueError("beside failed too")

    with pytest.raises(KeyError, match="here failed"):
        at_once(here, beside, 2)
    assert finished == [True]


def test_a_stage_given_several_workers_uses_two_threads_and_one_worker_one():
    assert [threads_for(w) for w in (1, 2, 3, 16)] == [1, 2, 2, 2]
