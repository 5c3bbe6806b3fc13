"""What a tuning target string says about the machine: ``"llvm --num-cores=2"``.

The thread count decides the design space (with more than one thread every sketch makes its
outermost spatial loops parallel, as MetaSchedule's ParallelizeVectorizeUnroll rule does) and
how candidates are measured (on that many threads), so a record is only comparable with
records of the same count.
"""

from __future__ import annotations

import re

from ..errors import ValidationError

__all__ = ["declared_threads", "same_target", "target_config", "target_text",
           "target_threads"]

_CORES = re.compile(r"-num-cores[= ](\S+)")


def declared_threads(target) -> int | None:
    """The ``--num-cores`` of ``target``, or None when it does not say."""
    found = _CORES.search(str(target))
    if found is None:
        return None
    try:
        value = int(found.group(1))
    except ValueError:
        value = 0
    if value < 1:
        raise ValidationError(f"target {str(target)!r}: --num-cores must be a positive "
                              f"integer, got {found.group(1)!r}", key="target",
                              hint="write e.g. 'llvm --num-cores=2'")
    return value


def target_threads(target) -> int:
    """Threads a kernel tuned for ``target`` runs on: its ``--num-cores``, else msc's current
    thread count (TVM takes the host's cores when the target does not say)."""
    from ..backend.runtime.threads import get_num_threads

    declared = declared_threads(target)
    return declared if declared is not None else get_num_threads()


def same_target(recorded: str, wanted) -> bool:
    """Whether a record measured for ``recorded`` counts for ``wanted``: the same kind, and
    the same ``--num-cores`` when both name one."""
    if str(recorded).split()[:1] != str(wanted).split()[:1]:
        return False
    a, b = declared_threads(recorded), declared_threads(wanted)
    return a is None or b is None or a == b


def target_text(target) -> str:
    """A target as msc keeps it: ``"llvm --num-cores=2"``, from that text or from TVM's JSON
    config (``{"kind": "llvm", "num-cores": 2, ...}``, what TVM 0.27 writes in records)."""
    if isinstance(target, dict):
        cores = target.get("num-cores")
        kind = str(target.get("kind", "llvm"))
        return f"{kind} --num-cores={int(cores)}" if cores is not None else kind
    return str(target)


def target_config(target) -> dict:
    """TVM's JSON config of a target (``Target.export()``), as its records hold it."""
    text = target_text(target)
    config = {"kind": text.split()[0] if text.split() else "llvm", "tag": "", "keys": ["cpu"]}
    cores = declared_threads(text)
    if cores is not None:
        config["num-cores"] = cores
    return config
