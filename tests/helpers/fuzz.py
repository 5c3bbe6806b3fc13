"""Shared pieces of the fuzz tests (issue #20): how many examples, the per-example time guard,
the property every loader must keep, and text mutations.

CI runs ``FUZZ_SETTINGS`` (fixed seed, a few hundred examples); a long local run raises the
count: ``MSC_FUZZ_EXAMPLES=5000 python -m pytest tests -k fuzz -q``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from msc.errors import MSCError

EXAMPLES = int(os.environ.get("MSC_FUZZ_EXAMPLES", "150"))
TIME_LIMIT = 10  # seconds per example: anything slower counts as a hang

FUZZ_SETTINGS = settings(derandomize=True, max_examples=EXAMPLES, deadline=None,
                         suppress_health_check=list(HealthCheck), database=None)


@contextlib.contextmanager
def time_guard(seconds: int = TIME_LIMIT, error: BaseException | None = None):
    """Fail an example that runs longer than ``seconds`` (SIGALRM, main thread only), with
    ``error`` (default: an AssertionError that the loader hung)."""
    def hang(signum, frame):
        raise error or AssertionError(f"loader hung for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def loads_or_refuses(load, data, *names: str):
    """``load(data)`` returns, or raises an MSCError whose message is non-empty and mentions
    each of ``names`` (the file the loader was given). Any other exception fails the test."""
    with time_guard():
        try:
            return load(data)
        except MSCError as err:
            text = str(err)
            assert text.strip(), f"empty message from {type(err).__name__}"
            for name in names:
                assert name in text, f"{name!r} not named in: {text[:300]}"
            return None


_TOKENS = re.compile(r"\w+|\s+|.", re.DOTALL)


def tokens(text: str) -> list[str]:
    return _TOKENS.findall(text)


@st.composite
def mutated_text(draw, sources: list[str]) -> str:
    """A source text with a few token deletions / duplications / swaps / unicode insertions,
    maybe truncated."""
    parts = tokens(draw(st.sampled_from(sources)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(parts) - 1))
        j = draw(st.integers(0, len(parts) - 1))
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "replace"]))
        if kind == "delete":
            del parts[i]
        elif kind == "duplicate":
            parts.insert(i, parts[i])
        elif kind == "swap":
            parts[i], parts[j] = parts[j], parts[i]
        elif kind == "insert":
            parts.insert(i, draw(st.text(min_size=1, max_size=3)))
        else:
            parts[i] = parts[j]
        if not parts:
            return ""
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text
