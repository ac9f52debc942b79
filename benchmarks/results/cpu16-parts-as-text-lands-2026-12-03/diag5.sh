#!/bin/bash
# setup, two tiles, fresh-process timelines at 16 workers and one (three rounds), cProfiles, fork cost
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
[ -d /tmp/site/hta ] || bash .wd/setup.sh > $OUT/setup.txt 2>&1
export PYTHONPATH=/tmp/site:.
for s in nv:sample_traces/h200x2-nvlink-none b200:tests/data/real/tracelens-b200-eager-rank0of8; do tag=${s%%:*}; src=${s#*:}
[ -f /tmp/t/$tag/rank0.tiled.pt.trace.json.gz ] || python3 benchmarks/tile_trace.py $src /tmp/t/$tag --events 1000000 --ranks 1 | tail -1; done
echo tiles $(( $(date +%s) - t0 ))
for r in 1 2 3; do for tag in nv b200; do for w in 16 1; do
TL_LOG=/tmp/tl.log python3 .wd/timeline.py /tmp/t/$tag $w $tag >> $OUT/timeline.jsonl 2>> $OUT/err.txt
done; done; done
echo timelines $(( $(date +%s) - t0 ))
for tag in nv b200; do python3 .wd/prof.py /tmp/t/$tag 16 tottime > $OUT/prof_${tag}_tot.txt 2>&1; python3 .wd/prof.py /tmp/t/$tag 16 cumulative > $OUT/prof_${tag}_cum.txt 2>&1; done
python3 -X importtime -c "from tpscope.cli import main; main(['analyze','/tmp/t/nv','--json','--no-cache','--workers','16'])" 2> $OUT/importtime.txt >/dev/null
python3 .wd/forkcost.py > $OUT/forkcost.txt 2>&1
echo all $(( $(date +%s) - t0 ))
uptime
