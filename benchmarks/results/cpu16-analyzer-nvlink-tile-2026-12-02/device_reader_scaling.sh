#!/bin/bash
# device: wheels unpacked to /tmp/site, the C reader built, then reader_scaling on the sources given
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/site && for w in .whl/*.whl; do python3 -m zipfile -e $w /tmp/site; done
export PYTHONPATH=/tmp/site
CF=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('CFLAGS') or '-O2')")
INC=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])")
SUF=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc $CF -O3 -DNDEBUG -fwrapv -shared -fPIC -I$INC -Ithird_party/yyjson tpscope/trace/_event_columns.c third_party/yyjson/yyjson.c -o tpscope/trace/_event_columns$SUF -lm || echo BUILD FAIL
python3 -c "import sys; sys.path.insert(0,'.'); from tpscope.trace.read import native; print('native', native.available())"
python3 -m compileall -q -j 0 tpscope benchmarks /tmp/site >/dev/null 2>&1; echo PYTHONDONTWRITEBYTECODE=$PYTHONDONTWRITEBYTECODE; nproc; uptime
tag=$1; shift
python3 benchmarks/reader_scaling.py --sources "$@" --rounds 5 --hta-rounds 5 --hta-sampled --out $OUT/reader_scaling_$tag.json > $OUT/log_$tag.txt 2>&1
echo rc $?; tail -20 $OUT/log_$tag.txt; uptime
