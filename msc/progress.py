"""Progress bars for long work (translating big models, compiling kernels, calibration, tuning).

One switch for the whole tool: bars go to stderr only when stderr is a terminal, and never when
quiet (``set_quiet(True)``, the CLI's ``--quiet``, or ``MSC_QUIET=1``), so logs and pipes stay
clean. Every long loop in msc wraps its iterable with ``progress(...)``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from tqdm import tqdm

_quiet = os.environ.get("MSC_QUIET", "") not in ("", "0")


class _Bar(tqdm):
    """tqdm without its monitor thread: tqdm starts that thread for every bar, disabled ones
    included, and a live foreign thread makes msc compile LLVM unisolated (no fork)."""

    monitor_interval = 0


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = bool(quiet)


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


def progress(iterable: Iterable | None = None, total: int | None = None, desc: str = "",
             unit: str = "it", delay: float = 0.0):
    """``tqdm`` over ``iterable`` on stderr, disabled when quiet or not a terminal.

    Used as an iterator (``for x in progress(xs, desc="calibrate")``) or, with ``total`` and no
    iterable, as a bar that the caller advances with ``.update(n)`` inside ``with``.
    ``delay``: seconds before the bar appears, so loops that are usually quick (a small
    model's import or build) do not flash one.
    """
    return _Bar(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=not enabled(), leave=False, dynamic_ncols=True, delay=delay)
