#!/bin/bash
# device: one tile's stages (one worker, every core) and its five interleaved rounds against HTA
# usage: bash scale.sh TAG SOURCE_RUN
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash .whl/setup.sh > $OUT/setup_$1.txt 2>&1
export PYTHONPATH=/tmp/site:.
python3 benchmarks/tile_trace.py $2 /tmp/t/$1 --events 1000000 --ranks 1 | tail -1
for w in 1 16; do python3 benchmarks/analyzer_stages.py /tmp/t/$1 --runs 2 --workers $w; done > $OUT/stages_$1.txt 2>&1
python3 benchmarks/reader_scaling.py --sources $2 --variants all,one_worker,two_cores --rounds 5 --hta-rounds 5 --hta-sampled --out $OUT/reader_scaling_$1.json > $OUT/log_$1.txt 2>&1
echo rc $?; tail -3 $OUT/log_$1.txt; uptime
