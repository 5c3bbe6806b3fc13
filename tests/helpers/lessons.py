"""Run a lesson file (examples/lessons/*.py) cell by cell, as a notebook would.

Cells are separated by ``# %%`` lines. They run in one module namespace with a real
``__file__`` (TVMScript decorators read their source), compiled with the ``__future__``
imports of earlier cells (as IPython does), and a failure names the cell's line.
"""

from __future__ import annotations

import codeop
import itertools
import os
import sys
import types
from contextlib import contextmanager
from pathlib import Path

LESSONS = Path(__file__).resolve().parents[2] / "examples" / "lessons"


class LessonError(AssertionError):
    pass


def cells(path: Path) -> list[tuple[int, str]]:
    """(first line, source padded to its line numbers) of each cell."""
    lines = path.read_text().split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("# %%")] + [len(lines)]
    return [(a + 1, "\n" * a + "\n".join(lines[a:b])) for a, b in itertools.pairwise(starts)]


def run_lesson(name: str, workdir: Path) -> dict:
    """The namespace after every cell of ``examples/lessons/<name>.py`` ran in ``workdir``."""
    path = LESSONS / f"{name}.py"
    module = types.ModuleType(f"lesson_{name}")
    module.__file__ = str(path)
    compile_cell = codeop.Compile()
    with _module(module), _cwd(workdir):
        for line, source in cells(path):
            try:
                exec(compile_cell(source, str(path), "exec"), module.__dict__)  # noqa: S102
            except Exception as exc:
                raise LessonError(f"{path.name}: the cell at line {line} failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
    return module.__dict__


@contextmanager
def _module(module: types.ModuleType):
    sys.modules[module.__name__] = module
    try:
        yield
    finally:
        sys.modules.pop(module.__name__, None)


@contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)
