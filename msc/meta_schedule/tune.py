"""``tune_tir`` and getting the best schedules back (MetaSchedule's API; ``tune_relax`` is
relax_integration.py's).

    from msc import meta_schedule as ms
    db = ms.tune_tir(mod, target="llvm --num-cores=1", work_dir="out/tune",
                     max_trials_global=64, num_trials_per_iter=16)
    sch = ms.tir_integration.compile_tir(db, mod, "llvm --num-cores=1")
    print(sch.mod.script())
    print(sch.trace)

One task per prim func of ``mod``; the trial budget is shared equally among them. Every
measured candidate goes to the database in ``work_dir`` as it is measured, and a later run
with the same ``work_dir`` trains on those records and does not measure them again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import MSCError, ValidationError
from ..s_tir.schedule import Schedule
from ..tir.function import PrimFunc
from .cost_model import make_cost_model
from .database import JSONDatabase
from .search import SearchResult, search

__all__ = ["TuneConfig", "compile_tir", "prim_funcs", "tune_tir"]

LOG = logging.getLogger("msc.meta_schedule")


def prim_funcs(mod) -> dict:
    """name -> PrimFunc of ``mod`` (a PrimFunc alone is ``main``)."""
    if isinstance(mod, PrimFunc):
        return {"main": mod}
    funcs = {gv.name_hint: mod[gv] for gv in mod.get_global_vars()}
    return {name: f for name, f in funcs.items() if isinstance(f, PrimFunc)}


def shares(total: int, count: int, weights: list | None = None) -> list:
    """``total`` trials split among ``count`` tasks: equally, or in proportion to
    ``weights`` (largest remainders first; a task of weight 0 gets none)."""
    if weights is None or not sum(weights) > 0:
        base, extra = divmod(total, count)
        return [base + (k < extra) for k in range(count)]
    exact = [total * w / sum(weights) for w in weights]
    out = [int(e) for e in exact]
    for k in sorted(range(count), key=lambda k: out[k] - exact[k])[:total - sum(out)]:
        out[k] += 1
    return out


@dataclass
class TuneConfig:
    """The trial budget as TVM 0.9/0.10 passed it: ``tune_tir(..., config=TuneConfig(...))``.
    Given a config, ``tune_tir`` returns the best Schedule, as TVM did then."""

    max_trials_global: int
    num_trials_per_iter: int = 64
    max_trials_per_task: int | None = None
    strategy: str = "evolutionary"


def tune_tir(mod, target, work_dir: str = "tune", max_trials_global: int | None = None, *,
             config: TuneConfig | None = None, space=None, task_name: str | None = None,
             max_trials_per_task: int | None = None, num_trials_per_iter: int = 64,
             cost_model="xgb", seed: int | None = None, min_repeat_ms: float = 40.0,
             time_budget_s: float | None = None, runner: str = "local",
             timeout: float = 60.0, analytic_starts: bool = True,
             task_weights: list | None = None, **ignored):
    """Tune every prim func of ``mod`` (an IRModule or a PrimFunc) by measured search on the
    llvmlite backend; returns the database (``work_dir``'s JSON-lines files).

    ``max_trials_global`` bounds the measured candidates of this run; ``time_budget_s`` may
    stop it earlier. ``space`` (``ms.space_generator.ScheduleFn(f)``) replaces msc's design
    space with ``f(sch)``, a schedule with sampling instructions. ``runner="popen"`` measures
    in a worker process, so a candidate that crashes native code or hangs past ``timeout``
    seconds is one failed record, not the end of the run ("local", the default, measures in
    this process: Python-level failures are caught there too). TVM's other options (builder,
    strategy, ...) are accepted and ignored. ``db.results`` lists each task's trials,
    failures and best/untuned seconds. ``cost_model``: "xgb" (gradient-boosted trees over
    per-store features, trained on everything measured in ``work_dir``, other workloads
    included) or "random". ``analytic_starts=False`` skips the analytic starting points.
    ``task_weights`` (one per prim func) share the budget in proportion, else equally.

    The older form ``tune_tir(mod=..., target=..., config=ms.TuneConfig(...), work_dir=...,
    task_name="main")`` takes its budget from ``config`` and returns the best Schedule.
    """
    if config is not None:
        max_trials_global = config.max_trials_global
        num_trials_per_iter = config.num_trials_per_iter
        max_trials_per_task = max_trials_per_task or config.max_trials_per_task
    if max_trials_global is None:
        raise ValidationError("tune_tir needs max_trials_global (or config=TuneConfig(...))",
                              key="max_trials_global")
    funcs = prim_funcs(mod)
    if not funcs:
        raise ValidationError("tune_tir needs a module with at least one T.prim_func")
    if int(max_trials_global) < 1 or int(num_trials_per_iter) < 1:
        raise ValidationError("max_trials_global and num_trials_per_iter must be >= 1",
                              key="max_trials_global")
    db = JSONDatabase(work_dir)
    db.results = []
    target = str(target)
    for (name, func), budget in zip(funcs.items(), shares(int(max_trials_global), len(funcs),
                                                          task_weights)):
        if max_trials_per_task is not None:
            budget = min(budget, int(max_trials_per_task))
        db.results.append(_tune_one(name, func, db, target, budget, num_trials_per_iter,
                                    cost_model, seed, min_repeat_ms, time_budget_s,
                                    (runner if runner in ("local", "popen") else "local",
                                     timeout), space, analytic_starts))
    if config is None:
        return db
    return compile_tir(db, mod, target, func_name=task_name if task_name in funcs else None)


def _tune_one(name, func, db, target, budget, per_iter, cost_model, seed, min_repeat_ms,
              time_budget_s, runner: tuple, space=None, analytic_starts: bool = True
              ) -> SearchResult | None:
    if budget < 1:
        return None
    try:
        return search(func, db, target, budget, int(per_iter),
                      make_cost_model(cost_model, seed or 0), seed or 0, min_repeat_ms, name,
                      time_budget_s, *runner, space, analytic_starts)
    except MSCError as exc:  # e.g. symbolic shapes: this task stays untuned, the rest go on
        LOG.warning("tune %s: skipped (%s)", name, exc)
        return None


def compile_tir(database: JSONDatabase, mod, target=None, *, func_name: str | None = None,
                fallback: bool = True) -> Schedule | None:
    """A Schedule of ``mod`` with the best recorded trace of its prim func replayed
    (``func_name`` when the module has several). Without a valid record (or when the replay
    fails) the untuned Schedule when ``fallback``, else None."""
    funcs = prim_funcs(mod)
    name = func_name or ("main" if "main" in funcs else next(iter(funcs), None))
    if name not in funcs:
        raise ValidationError(f"no prim func {name!r} in the module", key=name,
                              hint=f"prim funcs: {sorted(funcs)}")
    best = database.query_schedule(mod, target, workload_name=name)
    if best is not None or not fallback:
        return best
    sch = Schedule(mod)
    sch.work_on(name)
    return sch
