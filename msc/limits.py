"""Limits on what a model may declare, checked before the work or the memory is spent.

A small file can declare a huge graph: an ONNX Loop of 4,096 steps around another of 4,096
unrolls to 16 million joints, a Scan over a sequence declared 10^7 long to ten million body
copies. Readers check the count they are about to build against ``max_joints()`` first and
raise a ResourceLimitError naming the model part and the setting::

    check_joints(16_781_313, "unrolling Loop 'outer'", node="outer")
    # ResourceLimitError: node 'outer': unrolling Loop 'outer' would make 16781313 joints, over
    # the limit of 1000000 (hint: raise it with MSC_MAX_JOINTS=... or msc.limits.joint_limit)

The default (1,000,000) is fifty times the largest graph the tests build (a 20,000-joint
chain) and far above real models (a 70B LLM export has some 10^4 nodes). Raise it for one
process with ``MSC_MAX_JOINTS=5000000``, or for a block of code::

    with joint_limit(5_000_000):
        graph, weights = from_onnx("huge.onnx")
"""

from __future__ import annotations

import contextlib
import os

from .errors import ResourceLimitError

__all__ = ["DEFAULT_MAX_JOINTS", "JointBudget", "check_joints", "joint_limit", "max_joints"]

DEFAULT_MAX_JOINTS = 1_000_000
ENV = "MSC_MAX_JOINTS"
_override: list[int] = []  # joint_limit() blocks, innermost last


def max_joints() -> int:
    """The current limit: the innermost ``joint_limit``, else $MSC_MAX_JOINTS, else the
    default."""
    if _override:
        return _override[-1]
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_MAX_JOINTS
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ResourceLimitError(f"{ENV}={text!r} is not a positive integer",
                                 hint=f"e.g. {ENV}={DEFAULT_MAX_JOINTS * 5}")
    return int(text)


@contextlib.contextmanager
def joint_limit(limit: int):
    """Use ``limit`` as the joint limit inside the block."""
    if int(limit) < 1:
        raise ValueError(f"joint limit must be positive, got {limit}")
    _override.append(int(limit))
    try:
        yield
    finally:
        _override.pop()


def check_joints(count: int, what: str, **context) -> None:
    """Raise ResourceLimitError when ``count`` joints would pass the limit."""
    limit = max_joints()
    if count > limit:
        raise ResourceLimitError(f"{what} would make {count} joints, over the limit of {limit}",
                                 hint=f"if the model is really this large, raise the limit "
                                      f"with {ENV}={count} or msc.limits.joint_limit({count})",
                                 **context)


class JointBudget:
    """Joints spent so far by one reader, and the check before spending more."""

    def __init__(self):
        self.spent = 0
        self._fits = 0  # counts up to this passed the limit: no need to read it again

    def reserve(self, count: int, what: str, **context) -> None:
        """Check that ``count`` more joints fit, without spending them."""
        if self.spent + count > self._fits:  # spend runs once per joint: $MSC_MAX_JOINTS
            check_joints(self.spent + count, what, **context)  # is read again only past it
            self._fits = max_joints()

    def spend(self, count: int, what: str, **context) -> None:
        self.reserve(count, what, **context)
        self.spent += count
