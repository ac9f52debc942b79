"""README's commands: the test command is the one CI runs, and the main job runs as written."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_ci_runs_readme_test_command():
    """README's test command is a script that installs what the tests need and runs them all, and
    CI runs that script."""
    install, test_command = (part.strip() for part in readme_commands()[1].split("&&"))
    assert test_command == ".ci/test"
    # the same torch as the quick start
    assert install == readme_commands()[0].split("&&")[0].strip()
    script = [line.strip() for line in (ROOT / ".ci" / "test").read_text().splitlines()]
    assert 'python3 -m pip install -q -e ".[test]"' in script
    assert any("apt-get install" in line and "chromium-driver" in line for line in script)
    assert script[-1] == "python3 -m pytest -q -p no:cacheprovider"
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci_lines[-1] == test_command


def test_install_takes_pytorchs_cpu_wheel_index():
    install = readme_commands()[0].split("&&")[0].strip()
    assert install == "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def test_quick_start_analyze_runs_on_the_bundled_sample():
    main_job = readme_commands()[0].split("&&")[-1].strip()
    assert main_job == "tpscope analyze"
    done = subprocess.run(
        [sys.executable, "-m", "tpscope.cli", "analyze"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "exposed communication" in done.stdout
