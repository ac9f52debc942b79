"""The padded heap: freed numpy arrays' pages are reused, not faulted in again."""

import subprocess
import sys

PROBE = """
import resource, sys
from tpscope.allocator import pad_the_heap
took = pad_the_heap() if sys.argv[1] == "pad" else False
import numpy as np

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

x = np.ones(2 << 20)  # freeing a 16 MB array lets the next ones come from the heap
del x
before = faults()
for _ in range(10):  # 64 MB of arrays made and dropped, ten times
    arrays = [np.ones(2 << 20) for _ in range(4)]
    del arrays
print(took, faults() - before)
"""


def faults(mode: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


def test_a_padded_heap_reuses_freed_pages():
    took, padded = faults("pad")
    _, plain = faults("plain")
    assert took == "True"  # Linux with glibc, as CI
    # 40 arrays of 4,096 pages: unpadded, the trimmed heap faults most of them in again
    assert plain > 4 * 4096
    assert padded < 4096
