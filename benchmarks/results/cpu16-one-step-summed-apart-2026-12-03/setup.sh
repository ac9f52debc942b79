#!/bin/bash
# device: wheels unpacked to /tmp/site, the C reader built, modules byte-compiled
mkdir -p /tmp/site && tar xJf .wd/site.tar.xz -C /tmp/site
CF=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('CFLAGS') or '-O2')")
INC=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])")
SUF=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc $CF -O3 -DNDEBUG -fwrapv -shared -fPIC -I$INC -Ithird_party/yyjson tpscope/trace/_event_columns.c third_party/yyjson/yyjson.c -o tpscope/trace/_event_columns$SUF -lm || echo BUILD FAIL
PYTHONPATH=/tmp/site python3 -m compileall -q -j 0 tpscope benchmarks /tmp/site >/dev/null 2>&1
python3 -m compileall -q -j 0 $(python3 -c "import numpy, os; print(os.path.dirname(numpy.__file__))") >/dev/null 2>&1 || echo NUMPY COMPILE FAIL
PYTHONPATH=/tmp/site:. python3 -c "from tpscope.trace.read import native; print('native', native.available())"
echo PYTHONDONTWRITEBYTECODE=$PYTHONDONTWRITEBYTECODE; nproc; uptime; python3 --version
