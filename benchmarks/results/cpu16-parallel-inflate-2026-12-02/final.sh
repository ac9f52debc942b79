#!/bin/bash
# one call (BUDGET_S seconds at most): setup, two sampled runs of the nvlink-none tile (inflated in parallel,
# and in one stream), then the three tiles against HTA, each begun while a minute is left
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
python3 benchmarks/tile_trace.py sample_traces/h200x2-nvlink-none /tmp/t/nv --events 1000000 --ranks 1 | tail -1
for v in "16 16 raw" "16 999 raw"; do python3 .wd/memlog.py python3 .wd/var.py /tmp/t/nv $v; done > $OUT/memlog.txt 2>&1
echo checks $(( $(date +%s) - t0 ))
for s in nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
left=$(( ${1:-575} - $(date +%s) + t0 )); [ $left -gt 60 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker,two_cores --rounds 5 --hta-rounds 5 --hta-sampled --out $OUT/reader_scaling_$tag.json > $OUT/log_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -1 $OUT/log_$tag.txt; done
uptime
