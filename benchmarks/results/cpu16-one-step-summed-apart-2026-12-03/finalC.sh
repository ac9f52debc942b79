#!/bin/bash
# setup; tiles of the given sources against HTA: every core and one worker, 7 interleaved rounds, HTA in the first 5
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
mkdir -p /tmp/o
[ -d /tmp/site/hta ] || bash .wd/setup.sh > /tmp/o/setup_$2.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in $(echo $1 | tr ',' ' '); do tag=${s%%:*}; src=${s#*:}
left=$(( ${3:-560} - $(date +%s) + t0 )); [ $left -gt 150 ] || break
timeout $left python3 benchmarks/reader_scaling.py --sources $src --variants all,one_worker --rounds 7 --hta-rounds 5 --hta-sampled --out /tmp/o/reader_scaling_$tag.json > /tmp/o/log_$tag.txt 2>&1
echo $tag rc $? $(( $(date +%s) - t0 )); tail -1 /tmp/o/log_$tag.txt; done
uptime | tee /tmp/o/uptime_$2.txt
cd /tmp/o && tar czf $OUT/final_$2.tgz .
