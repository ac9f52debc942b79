#!/bin/bash
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
for t in nv:sample_traces/h200x2-nvlink-none shm:sample_traces/h200x2-shm-chunked b200:tests/data/real/tracelens-b200-eager-rank0of8; do
  tag=${t%%:*}; src=${t#*:}
  python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1
done
echo setup+tiles $(( $(date +%s) - t0 ))
python3 .wd/inflate.py /tmp/t/nv/*.gz > $OUT/inflate.txt 2>&1
echo inflate $(( $(date +%s) - t0 ))
for r in 1 2; do for tag in nv shm b200; do for v in "1 999 here" "16 999 raw" "16 999 pool" "16 8 raw" "16 8 raw 1"; do echo -n "$tag "; python3 .wd/var.py /tmp/t/$tag $v; done; done; done > $OUT/variants.txt 2>&1
echo variants $(( $(date +%s) - t0 ))
PYTHONPATH=/tmp/site:. python3 .wd/probe.py /tmp/t/nv > $OUT/probe.txt 2>&1
for tag in nv; do for v in "16 999 raw" "16 999 pool" "16 8 raw" "16 8 raw 1"; do python3 .wd/memlog.py python3 .wd/var.py /tmp/t/$tag $v; done; done > $OUT/memlog.txt 2>&1
echo all $(( $(date +%s) - t0 )); uptime
python3 benchmarks/reader_scaling.py --sources sample_traces/h200x2-nvlink-none --variants all,one_worker,two_cores --rounds 5 --hta-rounds 5 --hta-sampled --out $OUT/reader_scaling_nv.json > $OUT/log_nv.txt 2>&1
echo rc $?; tail -2 $OUT/log_nv.txt; echo final $(( $(date +%s) - t0 )); uptime
