#!/bin/bash
# setup; the three tiles against HTA: every core and one worker, 7 interleaved rounds, HTA in the first $3 (default 3);
# then each tile's --json at one worker and at 16 (md5), and b200 timelines, if time is left
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); budget=${2:-590}
mkdir -p /tmp/o
[ -d /tmp/site/hta ] || bash .wd/setup.sh > /tmp/o/setup_$1.txt 2>&1
export PYTHONPATH=/tmp/site:.
git log --oneline -1 > /tmp/o/commit.txt
for s in b200:tests/data/real/tracelens-b200-eager-rank0of8 nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked; do tag=${s%%:*}; src=${s#*:}
left=$(( budget - $(date +%s) + t0 )); [ $left -gt 100 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker --rounds 7 --hta-rounds ${3:-3} --hta-sampled --out /tmp/o/reader_scaling_$tag.json > /tmp/o/log_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -1 /tmp/o/log_$tag.txt; done
for s in nv:sample_traces/h200x2-nvlink-none b200:tests/data/real/tracelens-b200-eager-rank0of8 shm:sample_traces/h200x2-shm-chunked; do tag=${s%%:*}; src=${s#*:}
left=$(( budget - $(date +%s) + t0 )); [ $left -gt 25 ] || break
[ -d /tmp/t/$tag ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 > /dev/null
for w in 1 16; do echo "$tag $w $(python3 -m tpscope analyze /tmp/t/$tag --json --no-cache --workers $w | md5sum)" >> /tmp/o/md5.txt; done; done
for r in 1 2 3; do left=$(( budget - $(date +%s) + t0 )); [ $left -gt 8 ] || break
TL_LOG=/tmp/tl16.log python3 .wd/timeline.py /tmp/t/b200 16 b200 >> /tmp/o/timeline_b200.jsonl; done
uptime | tee /tmp/o/uptime_$1.txt
cd /tmp/o && tar czf $OUT/final_$1.tgz .
