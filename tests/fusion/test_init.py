"""`tpscope.fusion`'s public names: the two fused ops, imported with torch on first use only."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_importing_the_package_loads_no_torch():
    assert _python("import sys, tpscope, tpscope.fusion\nprint('torch' in sys.modules)") == "False"


def test_the_ops_are_the_package_s_names():
    code = (
        "import sys\n"
        "from tpscope.fusion import all_gather_matmul, matmul_reduce_scatter\n"
        "from tpscope.fusion.ops import api\n"
        "print(all_gather_matmul is api.all_gather_matmul,"
        " matmul_reduce_scatter is api.matmul_reduce_scatter, 'torch' in sys.modules)\n"
    )
    assert _python(code) == "True True True"


def test_another_name_is_an_attribute_error():
    import tpscope.fusion

    with pytest.raises(AttributeError, match="no attribute 'fused_matmul'"):
        tpscope.fusion.fused_matmul  # noqa: B018
    assert sorted(tpscope.fusion.__all__) == ["all_gather_matmul", "matmul_reduce_scatter"]
