#!/bin/bash
# setup, the three tiles, then fresh-process timelines (timeline.py) at 16 workers and at one, three rounds
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
echo tiles $(( $(date +%s) - t0 ))
for r in 1 2 3; do for tag in nv shm b200; do for w in 16 1; do
a=$(date +%s.%N); python3 .wd/timeline.py /tmp/t/$tag $w $tag >> $OUT/timeline.jsonl 2>> $OUT/err.txt; echo "$tag $w $a $(date +%s.%N)" >> $OUT/wall.txt
done; done; done
echo timelines $(( $(date +%s) - t0 ))
python3 -c "import numpy, sys; print(numpy.__version__, sys.version)"; uptime
