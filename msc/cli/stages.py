"""A progress bar over the stages of a command (load, build, run, ...), on stderr.

    with Stages("msc run", ["load", "build", "run"]) as stage:
        stage("load"); model = open_model(...)
        stage("build"); ...

Off when stderr is not a terminal or with --quiet (``msc.progress``), like every bar of msc.
"""

from __future__ import annotations

from ..progress import progress

__all__ = ["Stages"]


class Stages:
    def __init__(self, desc: str, names: list[str]):
        self._bar = progress(total=len(names), desc=desc, unit="stage")
        self._started = False

    def __call__(self, name: str) -> None:
        """Enter stage ``name`` (the one before it is done)."""
        if self._started:
            self._bar.update(1)
        self._started = True
        self._bar.set_postfix_str(name, refresh=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self._started and exc[0] is None:
            self._bar.update(1)
        self._bar.close()
