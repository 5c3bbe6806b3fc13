"""The docs site is true to the code: every python block of every page runs, every `msc X`
it mentions exists, and `mkdocs build --strict` passes (no broken link, no missing API)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))
BLOCKS = [(page, i, block) for page in PAGES for i, block in
          enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL))]


def test_the_site_has_its_pages():
    names = {p.relative_to(ROOT / "docs").as_posix() for p in PAGES}
    assert {"index.md", "getting-started.md", "graph.md", "frontends.md", "backend.md",
            "compression.md", "viewer.md", "cli.md", "tensorir.md", "hostile-input.md",
            "architecture.md", "contributing.md", "api.md", "onnx-out.md"} <= names


@pytest.mark.parametrize("page, index, block", BLOCKS,
                         ids=[f"{p.relative_to(ROOT / 'docs')}-{i}" for p, i, _ in BLOCKS])
def test_python_block_runs(page, index, block, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(block)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          check=False, env=env, text=True, timeout=300)
    assert proc.returncode == 0, f"{page.name} block {index}:\n{proc.stderr[-2000:]}"


def test_commands_the_pages_mention_exist():
    from msc.cli.commands import COMMANDS

    for page in PAGES:  # in code: fenced blocks and 4-space indented lines
        code = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", page.read_text(), re.DOTALL) +
                         re.findall(r"^    (.*)$", page.read_text(), re.MULTILINE))
        for name in re.findall(r"^\s*msc (\w+) ", code, re.MULTILINE):
            assert name in COMMANDS, f"{page.name} mentions `msc {name}`, which does not exist"


def test_mkdocs_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=300, env={**os.environ,
                                                         "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("from_onnx") >= 1
