#!/bin/bash
# setup (numpy byte-compiled); JSON one worker vs 16; timelines; the parts' share A/B; every core against one worker (no HTA)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
mkdir -p /tmp/o
[ -d /tmp/site/hta ] || bash .wd/setup.sh > /tmp/o/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
[ -f /tmp/t/$tag/rank0.tiled.pt.trace.json.gz ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
for tag in nv shm b200; do for w in 1 16; do python3 -m tpscope analyze /tmp/t/$tag --json --no-cache --workers $w > /tmp/j_${tag}_$w.json; echo "$tag $w $(md5sum < /tmp/j_${tag}_$w.json)"; done; done > /tmp/o/md5.txt 2>&1
echo checks $(( $(date +%s) - t0 ))
for r in 1 2 3; do for tag in nv b200 shm; do for w in 16 1; do
TL_LOG=/tmp/tl.log python3 .wd/timeline.py /tmp/t/$tag $w $tag >> /tmp/o/tl.txt 2>> /tmp/o/err.txt
done; done; done
for r in 1 2 3; do for tag in nv shm; do for share in 0 0.2 0.4; do
TL_SHARE=$share TL_LOG=/tmp/tl.log python3 .wd/timeline.py /tmp/t/$tag 16 $tag >> /tmp/o/tl_share.txt 2>> /tmp/o/err.txt
done; done; done
echo timelines $(( $(date +%s) - t0 ))
for s in nv:sample_traces/h200x2-nvlink-none b200:tests/data/real/tracelens-b200-eager-rank0of8 shm:sample_traces/h200x2-shm-chunked; do tag=${s%%:*}; src=${s#*:}
left=$(( ${1:-330} - $(date +%s) + t0 )); [ $left -gt 40 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker --rounds 5 --hta-rounds 0 --no-memory --out /tmp/o/ratio_$tag.json > /tmp/o/log_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -1 /tmp/o/log_$tag.txt; done
uptime
cd /tmp/o && tar czf $OUT/o.tgz .
