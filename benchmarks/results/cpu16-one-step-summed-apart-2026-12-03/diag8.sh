#!/bin/bash
# setup; b200 tile: timelines at 16 workers and one, interleaved, to find the stage that jumps
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/o
[ -d /tmp/site/hta ] || bash .wd/setup.sh > /tmp/o/setup_d8.txt 2>&1
export PYTHONPATH=/tmp/site:.
[ -d /tmp/t/b200 ] || python3 benchmarks/tile_trace.py tests/data/real/tracelens-b200-eager-rank0of8 /tmp/t/b200 --events 1000000 --ranks 1 > /dev/null
for r in 1 2 3 4 5 6 7 8 9 10; do
  TL_LOG=/tmp/tl16.log python3 .wd/timeline.py /tmp/t/b200 16 b200 >> /tmp/o/timeline_d8.jsonl
  [ $r -le 4 ] && TL_LOG=/tmp/tl1.log python3 .wd/timeline.py /tmp/t/b200 1 b200 >> /tmp/o/timeline_d8.jsonl
done
for r in 1 2 3; do /usr/bin/time -f "%e %U %S" python3 -m tpscope.cli analyze /tmp/t/b200 --json --no-cache --workers 16 > /dev/null 2>> /tmp/o/time16.txt; done
uptime > /tmp/o/uptime_d8.txt; nproc >> /tmp/o/uptime_d8.txt; lscpu >> /tmp/o/uptime_d8.txt
cd /tmp/o && tar czf $OUT/diag8.tgz .
