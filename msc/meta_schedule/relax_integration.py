"""TVM's ``meta_schedule.relax_integration``: tune a whole Relax model, then build it tuned.

    from msc import meta_schedule as ms
    db = ms.relax_integration.tune_relax(mod, params, "llvm --num-cores=1", "out/tune",
                                         max_trials_global=64)
    ex = ms.relax_integration.compile_relax(db, mod, "llvm --num-cores=1", params)

The tasks are what ``relax.build`` compiles from TIR: the ``call_tir`` prim funcs of the
module, and the legalized PrimFunc of every op call left without a native kernel after
fusion (a LayerNorm variant, softmax, a conv1d, an einsum, ...), one task per distinct
workload (``extract_tasks``; its ``weight`` counts the calls); the trials go to the tasks in
proportion to the time the model spends in each. ``compile_relax`` builds with
the database's best schedule of each; a workload the database does not know, or whose best
record does not replay, gets the default lowering (``ex.stats["tuned"]`` counts the calls
that run a tuned schedule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import MSCError, ValidationError
from ..relax.module import IRModule
from ..tir.function import PrimFunc
from .database import JSONDatabase, workload_key
from .runner import CandidateError, Workload, measure
from .tune import compile_tir, prim_funcs, tune_tir

__all__ = ["ExtractedTask", "compile_relax", "extract_tasks", "schedule_lookup", "tune_relax"]


@dataclass
class ExtractedTask:
    """One workload to tune: ``mod["main"]`` is its PrimFunc; ``weight`` the calls of the
    model that run it (TVM's ``ExtractedTask``)."""

    task_name: str
    mod: IRModule
    target: str
    weight: int = 1


def extract_tasks(mod, target="llvm", params: dict | None = None) -> list[ExtractedTask]:
    """The PrimFuncs ``relax.build(mod)`` compiles from TIR, one task per workload, in
    program order: the module's own prim funcs first, then the legalized op calls."""
    from .. import relax

    mod = _bound(mod, params)
    tasks: dict = {}
    for name, func in prim_funcs(mod).items():
        _add(tasks, name, func, str(target))
    ex = relax.build(mod, target=target)
    for program in ex.programs.values():
        for node in program.walk():
            if node.path == "tir" and node.tir is not None and node.op:
                _add(tasks, _task_name(node.op), node.tir.func, str(target))
    return list(tasks.values())


def _add(tasks: dict, name: str, func: PrimFunc, target: str) -> None:
    key = workload_key(func)
    if key in tasks:
        tasks[key].weight += 1
        return
    taken = {t.task_name for t in tasks.values()}
    unique, k = name, 0
    while unique in taken:
        k += 1
        unique = f"{name}_{k}"
    tasks[key] = ExtractedTask(unique, IRModule({"main": func}), target)


def _task_name(op: str) -> str:
    return re.sub(r"\W", "_", op)


def _bound(mod, params: dict | None):
    if not params:
        return mod
    from ..relax.transform import BindParams

    return BindParams("main", params)(mod)


def tune_relax(mod, params: dict | None = None, target="llvm", work_dir: str = "tune",
               max_trials_global: int = 64, *, share: str = "time",
               **kwargs) -> JSONDatabase:
    """Tune every task of ``extract_tasks(mod)`` in ``work_dir``; the other keywords are
    ``tune_tir``'s. ``share="time"`` gives each task trials in proportion to the time the
    model spends in it untuned (its weight times one measured call: a kernel of 2% of the
    time gets few or none), ``"equal"`` the same number each. ``db.results`` lists each
    task's trials and best / untuned seconds (None for a task the budget did not reach or
    that cannot be tuned, e.g. symbolic shapes: it keeps its default lowering)."""
    if share not in SHARES:
        raise ValidationError(f"share={share!r}", key="share", hint=f"one of {SHARES}")
    tasks = extract_tasks(mod, target, params)
    if not tasks:
        db = JSONDatabase(work_dir)
        db.results = []
        return db
    tasks_mod = IRModule({t.task_name: t.mod["main"] for t in tasks})
    weights = untuned_seconds(tasks, target) if share == "time" else None
    return tune_tir(tasks_mod, target, work_dir, max_trials_global, task_weights=weights,
                    **kwargs)


SHARES = ("time", "equal")


def untuned_seconds(tasks: list, target, min_repeat_ms: float = 2.0) -> list:
    """Seconds the model spends in each task with the default lowering (a call's time times
    its weight, on the target's threads); 0 for one that cannot run alone (symbolic)."""
    from ..backend.runtime.threads import num_threads
    from .target import target_threads

    out = []
    with num_threads(target_threads(target)):
        for task in tasks:
            func = task.mod["main"]
            try:
                secs = min(measure(Workload(func), func, min_repeat_ms))
            except (MSCError, CandidateError):
                secs = 0.0
            out.append(secs * task.weight)
    return out


def _apply_to_prim_funcs(database: JSONDatabase, mod, target):
    """``mod`` with each of its own prim funcs replaced by its best recorded schedule."""
    funcs = prim_funcs(mod)
    if not funcs:
        return mod
    out = IRModule({gv.name_hint: mod[gv] for gv in mod.get_global_vars()}, mod.attrs)
    for name in funcs:
        sch = compile_tir(database, IRModule({name: funcs[name]}), target, func_name=name)
        out[out.get_global_var(name)] = sch.mod[name]
    return out


def schedule_lookup(database: JSONDatabase, target):
    """``func -> its best tuned form in database``, or None when the database does not know
    ``func`` or its best record is the untuned function: ``relax.build``'s ``tir_schedules``."""
    target = str(target)

    def lookup(func: PrimFunc) -> PrimFunc | None:
        best = database.get_top_k(func, 1, target)
        if not best or not best[0].trace.insts:  # unknown, or the default lowering won
            return None
        sch = database.query_schedule(IRModule({"main": func}), target)
        return sch.mod["main"] if sch is not None else None
    return lookup


def compile_relax(database: JSONDatabase, mod, target="llvm", params: dict | None = None):
    """``relax.build`` of ``mod`` with the best schedule in ``database`` of each prim func
    and of each legalized op call; unknown workloads get the default lowering."""
    from .. import relax

    mod = _apply_to_prim_funcs(database, _bound(mod, params), target)
    return relax.build(mod, target=target, tir_schedules=schedule_lookup(database, target))
