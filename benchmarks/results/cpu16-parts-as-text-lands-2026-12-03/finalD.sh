#!/bin/bash
# setup; nv and b200 tiles; memab.py (three interleaved rounds) on each
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
mkdir -p /tmp/o
[ -d /tmp/site/hta ] || bash .wd/setup.sh > /tmp/o/setup_D.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in nv:sample_traces/h200x2-nvlink-none b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
[ -f /tmp/t/$tag/rank0.tiled.pt.trace.json.gz ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
echo tiles $(( $(date +%s) - t0 ))
for tag in nv b200; do left=$(( ${1:-150} - $(date +%s) + t0 )); [ $left -gt 10 ] || break
timeout $left python3 .wd/memab.py /tmp/t/$tag 3 >> /tmp/o/memab.jsonl 2>> /tmp/o/memab_err.txt; echo $tag $(( $(date +%s) - t0 )); done
uptime | tee /tmp/o/uptime_D.txt
cd /tmp/o && tar czf $OUT/final_D.tgz memab.jsonl memab_err.txt uptime_D.txt setup_D.txt 2>/dev/null; ls $OUT
