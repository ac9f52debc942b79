#!/bin/bash
mkdir -p /tmp/site && for w in .whl/*.whl; do python3 -m zipfile -e $w /tmp/site; done
export PYTHONPATH=/tmp/site
CF=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('CFLAGS') or '-O2')")
INC=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])")
SUF=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc $CF -O3 -DNDEBUG -fwrapv -shared -fPIC -I$INC -Ithird_party/yyjson tpscope/trace/_event_columns.c third_party/yyjson/yyjson.c -o tpscope/trace/_event_columns$SUF -lm || echo BUILD FAIL
ls tpscope/metrics/forked.py; python3 -c "import numpy, sys; print(numpy.__version__, sys.version)"
python3 benchmarks/tile_trace.py sample_traces/h200x2-nvlink-none /tmp/t/nv --events 1000000 --ranks 1 >/dev/null &
python3 benchmarks/tile_trace.py sample_traces/h200x2-shm-chunked /tmp/t/shm --events 1000000 --ranks 1 >/dev/null &
python3 benchmarks/tile_trace.py tests/data/real/tracelens-b200-eager-rank0of8 /tmp/t/b200 --events 1000000 --ranks 1 >/dev/null &
wait
for t in nv shm b200; do for w in 1 16; do echo "== $t workers $w"; python3 benchmarks/analyzer_stages.py /tmp/t/$t --runs 3 --workers $w | tail -4; done; done 2>&1 | tee $OUT/stages.txt
python3 -m cProfile -o $OUT/nv_w1.prof -m tpscope.cli analyze /tmp/t/nv --json --no-cache --workers 1 > /dev/null 2>&1
python3 -c "import pstats; pstats.Stats('$OUT/nv_w1.prof').sort_stats('tottime').print_stats(25)" | tail -35 > $OUT/nv_w1_prof.txt
