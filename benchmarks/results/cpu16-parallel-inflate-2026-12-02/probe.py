"""Where numpy.ma is first imported: in one part's decode (as a forked part runs it) and in a whole one-worker analysis."""

import contextlib
import glob
import io
import sys
import traceback


class F:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy.ma":
            print("numpy.ma imported at:", file=sys.stderr)
            traceback.print_stack(limit=10)
        return None


import numpy  # noqa: E402 - after the clock starts

print("numpy", numpy.__version__, file=sys.stderr)
import isal.igzip as ig  # noqa: E402 - after the clock starts

from tpscope.trace.read import cut, parallel, stream  # noqa: E402 - after the clock starts

b = ig.open(glob.glob(sys.argv[1] + "/*.gz")[0]).read()[:30_000_000]
s = parallel._array_start(b)
e = cut.last_cut(b, s, len(b))
sys.meta_path.insert(0, F())
print("== part", file=sys.stderr)
stream.decode_span(b, s + 1, e)
print("== part done; numpy.ma loaded:", "numpy.ma" in sys.modules, file=sys.stderr)
from tpscope.cli import main  # noqa: E402 - after the clock starts

with contextlib.redirect_stdout(io.StringIO()):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", "1"])
