import contextlib
import cProfile
import os
import pstats
import sys

from tpscope.cli import main

pr = cProfile.Profile()
out = open(os.devnull, "w")
pr.enable()
with contextlib.redirect_stdout(out):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", sys.argv[2]])
pr.disable()
st = pstats.Stats(pr)
st.sort_stats(sys.argv[3] if len(sys.argv) > 3 else "cumulative").print_stats(45)
