"""README's commands: the test command is the one CI runs, and the main job runs as written."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_ci_runs_readme_test_command():
    test_command = readme_commands()[1].split("&&")[-1].strip()
    assert test_command.startswith("python3 -m pytest")
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_quick_start_analyze_runs_on_the_bundled_sample():
    main_job = readme_commands()[0].split("&&")[-1].strip()
    assert main_job == "tpscope analyze"
    done = subprocess.run([sys.executable, "-m", "tpscope.cli", "analyze"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "exposed communication" in done.stdout
