#!/bin/bash
# setup; per tile: reader_scaling every core / one worker, 5 rounds, no HTA; then timelines at 16 (3) and 1 (2)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); budget=${1:-300}
mkdir -p /tmp/o
[ -d /tmp/site/hta ] || bash .wd/setup.sh > /tmp/o/setup_d9.txt 2>&1
export PYTHONPATH=/tmp/site:.
git log --oneline -1 > /tmp/o/commit.txt; git status --short >> /tmp/o/commit.txt
for s in shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8 nv:sample_traces/h200x2-nvlink-none; do tag=${s%%:*}; src=${s#*:}
left=$(( budget - $(date +%s) + t0 )); [ $left -gt 40 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker --rounds 5 --hta-rounds 0 --no-memory --out /tmp/o/rs9_$tag.json > /tmp/o/log9_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -3 /tmp/o/log9_$tag.txt; done
for s in shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8 nv:sample_traces/h200x2-nvlink-none; do tag=${s%%:*}; src=${s#*:}
[ -d /tmp/t/$tag ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 > /dev/null
for r in 1 2 3; do left=$(( budget - $(date +%s) + t0 )); [ $left -gt 10 ] || break
TL_LOG=/tmp/tl16.log python3 .wd/timeline.py /tmp/t/$tag 16 $tag >> /tmp/o/timeline9.jsonl
[ $r -le 2 ] && TL_LOG=/tmp/tl1.log python3 .wd/timeline.py /tmp/t/$tag 1 $tag >> /tmp/o/timeline9.jsonl
done; done
uptime > /tmp/o/uptime_d9.txt; nproc >> /tmp/o/uptime_d9.txt
cd /tmp/o && tar czf $OUT/diag9.tgz .
