"""The README's examples run as written (docs stay true to the code)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PY_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)


@pytest.mark.parametrize("index", range(len(PY_BLOCKS)))
def test_python_example_runs(index, tmp_path):
    # Our own documentation, run in a fresh interpreter from the repo root.
    script = tmp_path / "example.py"
    script.write_text(PY_BLOCKS[index])
    # PYTHONPATH: the checkout under test, whichever install the interpreter has.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, check=False,
                          env=env,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_readme_commands_exist():
    from msc.cli.commands import COMMANDS

    for name in re.findall(r"^msc (\w+) ", README, re.MULTILINE):
        assert name in COMMANDS, f"README mentions `msc {name}` which does not exist"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./run test" in README and "./run test" in ci
    assert os.access(ROOT / "run", os.X_OK)
