#!/bin/bash
# setup, the three tiles, fresh-process timelines at 16 workers and at one (three rounds), importtime
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
[ -d /tmp/site/hta ] || bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
gcc -v 2>&1 | tail -1 > /dev/null
for s in nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
[ -f /tmp/t/$tag/rank0.tiled.pt.trace.json.gz ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
echo tiles $(( $(date +%s) - t0 ))
for r in 1 2 3; do for tag in nv shm b200; do for w in 16 1; do
a=$(date +%s.%N); python3 .wd/timeline.py /tmp/t/$tag $w $tag >> $OUT/timeline.jsonl 2>> $OUT/err.txt; echo "$tag $w $a $(date +%s.%N)" >> $OUT/wall.txt
done; done; done
echo timelines $(( $(date +%s) - t0 ))
python3 -X importtime -c "from tpscope.cli import main" 2> $OUT/importtime.txt
for tag in nv shm b200; do python3 -m tpscope analyze /tmp/t/$tag --json --no-cache --workers 16 | md5sum; done > $OUT/md5.txt
uptime
