"""The one choice of how a file is read (`read/strategy.py`), case by case."""

from tpscope.trace.read.strategy import (
    INFLATE_MIN_WORKERS,
    PARTS_MIN_WORKERS,
    SPLIT_MIN_BYTES,
    THREADS_MIN_BYTES,
    Plan,
    choose,
)

BIG = SPLIT_MIN_BYTES
MID = THREADS_MIN_BYTES


def test_one_worker_a_small_file_or_an_unknown_size_is_one_stream():
    assert choose(BIG, 1, True, True) == Plan("stream")
    assert choose(MID - 1, 16, True, True) == Plan("stream")
    assert choose(None, 16, True, True, local=False) == Plan("stream")


def test_a_big_file_on_many_cores_is_read_in_forked_parts():
    assert choose(BIG, 16, True, True) == Plan("parts", workers=16)
    assert choose(BIG, 16, False, True) == Plan("parts", workers=16)  # msgspec in each part
    assert choose(BIG, PARTS_MIN_WORKERS, True, True).how == "parts"


def test_otherwise_threads_read_each_chunk_where_the_c_reader_is_built():
    assert choose(BIG, 2, True, True) == Plan("stream", threads=2)  # two cores: threads win
    assert choose(BIG - 1, 16, True, True) == Plan("stream", threads=16)
    assert choose(BIG, 16, True, False) == Plan("stream", threads=16)  # no fork (threads)
    assert choose(BIG, 2, False, False) == Plan("stream", threads=1)  # msgspec holds the GIL


def test_without_the_c_reader_two_workers_are_two_processes():
    assert choose(BIG, 2, False, True) == Plan("parts", workers=2)


def test_a_gzip_file_is_inflated_by_half_the_workers_on_many_cores_where_it_can_be():
    many, fewer = INFLATE_MIN_WORKERS, INFLATE_MIN_WORKERS - 1
    assert choose(BIG, many, True, True, parallel_inflate=True) == Plan(
        "parts", workers=many, inflate_threads=many // 2
    )
    assert choose(BIG, fewer, True, True, parallel_inflate=True) == Plan("parts", workers=fewer)
    assert choose(BIG, many, True, True, parallel_inflate=False) == Plan("parts", workers=many)
    assert choose(BIG - 1, many, True, True, parallel_inflate=True).inflate_threads == 1  # stream
