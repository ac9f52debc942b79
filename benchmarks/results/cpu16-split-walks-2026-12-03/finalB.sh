#!/bin/bash
# setup; the tiles' JSON at one worker and at 16 compared; then nv and shm against HTA (five interleaved rounds)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
[ -d /tmp/site/hta ] || bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in nv:sample_traces/h200x2-nvlink-none b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
[ -f /tmp/t/$tag/rank0.tiled.pt.trace.json.gz ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
for tag in nv b200; do for w in 1 16; do python3 -m tpscope analyze /tmp/t/$tag --json --no-cache --workers $w > /tmp/j_${tag}_$w.json; echo "$tag $w $(md5sum < /tmp/j_${tag}_$w.json)"; done
python3 .wd/check.py /tmp/j_${tag}_1.json /tmp/j_${tag}_16.json | head -5; done > $OUT/md5.txt 2>&1
echo checks $(( $(date +%s) - t0 ))
for s in b200:tests/data/real/tracelens-b200-eager-rank0of8 nv:sample_traces/h200x2-nvlink-none; do tag=${s%%:*}; src=${s#*:}
left=$(( ${1:-560} - $(date +%s) + t0 )); [ $left -gt 150 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker,two_cores --rounds 5 --hta-rounds 5 --hta-sampled --out $OUT/reader_scaling_$tag.json > $OUT/log_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -2 $OUT/log_$tag.txt; done
uptime
