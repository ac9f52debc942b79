"""A run's ranks as the reduce holds them: unpacked when the run is small, packed when it is large.

A rank's tables take about twelve times its packed map result (`compact.py`). A 1,024-rank run
unpacked at once needs gigabytes the driver may not have, so past `EAGER_PACKED_BYTES` of packed
results a `RankList` keeps each rank packed, unpacks it when it is read, and keeps the last
`RECENT` it unpacked; the metrics read the ranks one at a time. What the reduce needs of every
rank at once (rank, steps, the span of its GPU activities) is its `RankHeader`, always at hand.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence

from tpscope.trace.compact import PackedRank, RankHeader, header_of
from tpscope.trace.tables import RankTrace

# below this (about 200 MB of tables), every rank is unpacked once and kept (docs/metrics.md §1)
EAGER_PACKED_BYTES = 16 << 20
RECENT = 8  # unpacked ranks kept by a packed RankList


class RankList(Sequence):
    """The ranks of a run, in order: a sequence of `RankTrace` whose items may be held packed."""

    def __init__(
        self, items: Iterable[RankTrace | PackedRank], eager_bytes: int = EAGER_PACKED_BYTES
    ) -> None:
        items = list(items)
        packed = sum(len(x.data) for x in items if isinstance(x, PackedRank))
        if packed <= eager_bytes:
            items = [x.unpack() if isinstance(x, PackedRank) else x for x in items]
        self._items = items
        self.headers: tuple[RankHeader, ...] = tuple(map(header_of, items))
        self._recent: OrderedDict[int, RankTrace] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def packed(self) -> bool:
        """Whether some rank is held packed (unpacked on each read that misses the recent ones)."""
        return any(isinstance(x, PackedRank) for x in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        item = self._items[k]
        if isinstance(item, RankTrace):
            return item
        k = k % len(self._items)
        with self._lock:
            if k in self._recent:
                self._recent.move_to_end(k)
                return self._recent[k]
        r = item.unpack()
        with self._lock:
            self._recent[k] = r
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)
        return r

    def __iter__(self) -> Iterator[RankTrace]:
        return (self[k] for k in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self._items)

    def __getstate__(self) -> dict:  # pickled (the cache) without the lock and the recent ranks
        return {"items": self._items, "headers": self.headers}

    def __setstate__(self, state: dict) -> None:
        self._items, self.headers = state["items"], state["headers"]
        self._recent = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RankList({len(self)} ranks{', packed' if self.packed else ''})"
