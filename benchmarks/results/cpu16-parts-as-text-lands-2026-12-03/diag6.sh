#!/bin/bash
# setup (numpy byte-compiled); the tiles' JSON at one worker and 16 compared; timelines; every core against one worker (no HTA)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
[ -d /tmp/site/hta ] || bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
[ -f /tmp/t/$tag/rank0.tiled.pt.trace.json.gz ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
for tag in nv shm b200; do for w in 1 16; do python3 -m tpscope analyze /tmp/t/$tag --json --no-cache --workers $w > /tmp/j_${tag}_$w.json; echo "$tag $w $(md5sum < /tmp/j_${tag}_$w.json)"; done; done > $OUT/md5.txt 2>&1
echo checks $(( $(date +%s) - t0 ))
for r in 1 2 3; do for tag in nv b200; do for w in 16 1; do
TL_LOG=/tmp/tl.log python3 .wd/timeline.py /tmp/t/$tag $w $tag >> $OUT/tl.txt 2>> $OUT/err.txt
done; done; done
echo timelines $(( $(date +%s) - t0 ))
python3 -X importtime -c "from tpscope.cli import main; main(['analyze','/tmp/t/b200','--json','--no-cache','--workers','16'])" 2> $OUT/importtime.txt >/dev/null
for s in nv:sample_traces/h200x2-nvlink-none b200:tests/data/real/tracelens-b200-eager-rank0of8 shm:sample_traces/h200x2-shm-chunked; do tag=${s%%:*}; src=${s#*:}
left=$(( ${1:-330} - $(date +%s) + t0 )); [ $left -gt 40 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker --rounds 5 --hta-rounds 0 --no-memory --out $OUT/ratio_$tag.json > $OUT/log_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -1 $OUT/log_$tag.txt; done
uptime
