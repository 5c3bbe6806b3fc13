"""The search over one function's design space: sample, rank with the cost model, measure.

A candidate is the list of decisions of one run of the sketch (``space.apply_sketch``), in
sampling order; the sketch's sampling instructions (their kind, tile count, innermost limit
and loop extent) are read once from an analytic run, so new candidates are drawn and
mutated without scheduling anything. Per round of ``num_trials_per_iter``:

1. the first round measures the analytic points (a 4-row by 64-lane register tile, the
   reliable 10x over the untuned loops of a matmul; 4 rows of contiguous reductions, for a
   matrix-vector product), then random samples;
2. later rounds fit the cost model on everything measured in ``work_dir`` (this run, earlier
   runs, and other workloads: ``training.TrainingSet``), score a pool of random samples and
   mutations of the best measured candidates (a prime factor moved between two tile
   levels, a choice flipped) by the per-store features of their scheduled code
   (``features.per_store_features``), and measure the best predicted, 1 in 20 picked at
   random (eps-greedy, as TVM's search does);
3. every measured candidate, failed ones included, goes to the database at once; so does
   the untuned function (as an empty trace, once), so the best record is never slower.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from dataclasses import dataclass

import numpy as np

from ..backend.runtime.threads import num_threads
from ..errors import MSCError
from ..progress import progress
from ..s_tir.schedule import Schedule, Trace
from ..s_tir.schedule.schedule import perfect_tile
from .cost_model import RandomModel
from .database import FAILED, JSONDatabase, TuningRecord, workload_key
from .features import per_store_features
from .popen_runner import PopenRunner
from .runner import CandidateError, Workload, measure
from .space import ANALYTIC, apply_sketch
from .target import target_threads
from .training import TrainingSet

__all__ = ["SearchResult", "search"]

LOG = logging.getLogger("msc.meta_schedule")
_EPS_GREEDY = 0.05
_TOP_K = 8


@dataclass
class Spec:
    """One sampling instruction of the sketch."""

    kind: str       # "tile" or "choice"
    n: int          # factors of a tile / number of candidates of a choice
    limit: int      # innermost factor limit of a tile
    extent: int     # the tiled loop's extent


@dataclass
class SearchResult:
    name: str
    trials: int
    failures: int
    best_secs: float
    untuned_secs: float
    seconds: float


def sketch_specs(func, space=None, threads: int = 1) -> tuple:
    """(specs, [starting decisions]): from the analytic runs of msc's sketch for ``threads``
    threads, or from one sampled run of a user's ``space`` (a function of a Schedule, as
    ``ScheduleFn`` wraps)."""
    specs, starts = [], []
    for variant in ANALYTIC if space is None else (None,):
        sch = Schedule(func)
        apply_sketch(sch, analytic=variant, threads=threads) if space is None else space(sch)
        specs, decisions = [], []
        for k, inst in enumerate(sch.trace.insts):
            if inst.kind == "SamplePerfectTile":
                d = sch.trace.decisions[k]
                specs.append(Spec("tile", inst.attrs[0], inst.attrs[1], math.prod(d)))
                decisions.append(list(d))
            elif inst.kind == "SampleCategorical":
                specs.append(Spec("choice", len(inst.attrs[0]), 0, 0))
                decisions.append(sch.trace.decisions[k])
        if decisions not in starts:
            starts.append(decisions)
    return specs, starts


def apply_candidate(func, decisions: list, space=None, threads: int = 1) -> Schedule:
    sch = Schedule(func)
    sch.force_decisions(decisions)
    space(sch) if space is not None else apply_sketch(sch, threads=threads)
    return sch


def _fits(specs: list, decisions: list) -> bool:
    """Whether recorded decisions belong to this design space (a work_dir may hold records
    of another space of the same function)."""
    return len(specs) == len(decisions) and all(
        isinstance(d, list) == (s.kind == "tile") and (s.kind != "tile" or len(d) == s.n)
        for s, d in zip(specs, decisions))


def _sample(rng: random.Random, specs: list) -> list:
    return [perfect_tile(rng, s.extent, s.n, s.limit) if s.kind == "tile"
            else rng.randrange(s.n) for s in specs]


def _mutate(rng: random.Random, specs: list, decisions: list) -> list:
    out = [list(d) if isinstance(d, list) else d for d in decisions]
    k = rng.randrange(len(specs))
    spec = specs[k]
    if spec.kind == "choice":
        out[k] = rng.randrange(spec.n)
        return out
    tile = out[k]
    src = rng.choice([i for i, f in enumerate(tile) if f > 1] or [0])
    dst = rng.randrange(len(tile))
    factor = next((p for p in range(2, tile[src] + 1) if tile[src] % p == 0), 1)
    tile[src] //= factor
    tile[dst] *= factor
    return out if tile[-1] <= spec.limit else decisions


def _key(decisions: list) -> str:
    return repr(decisions)


def _decisions_of(trace) -> list:
    return [trace.decisions[k] for k in sorted(trace.decisions)]


class _Search:
    def __init__(self, func, db: JSONDatabase, target: str, cost_model, seed: int,
                 min_repeat_ms: float, name: str, runner: str = "local",
                 timeout: float = 60.0, space=None, analytic_starts: bool = True):
        self.func, self.db, self.target, self.model = func, db, target, cost_model
        self.space = space
        self.rng = random.Random(seed)
        self.min_repeat_ms, self.name = min_repeat_ms, name
        self.task = Workload(func, seed)
        self.threads = target_threads(target)
        self.popen = PopenRunner(self.task, timeout, min_repeat_ms, self.threads) \
            if runner == "popen" else None
        self.workload = db.commit_workload(func)
        self.specs, self.starts = sketch_specs(func, space, self.threads)
        self.starts = self.starts if analytic_starts else []
        self.measured: dict = {}   # key -> (decisions, mean secs)
        self.wkey = workload_key(func)
        self.training = TrainingSet(os.path.dirname(db.path_tuning_record))
        self.rows: dict = {}       # key -> per-store features (None: does not schedule)
        self.has_baseline = False
        for record in db.records_of(func, target):
            d = _decisions_of(record.trace)
            if not record.trace.insts:  # the untuned function, recorded once
                self.has_baseline = True
                continue
            if not _fits(self.specs, d):
                continue
            self.measured[_key(d)] = (d, record.mean_secs)
            self._train(d, record.mean_secs)   # records of an msc without the feature file
        self.failures = 0

    def _tag(self, decisions: list) -> str:
        return f"{self.wkey}|{self.threads}|{_key(decisions)}"

    def _rows_of(self, decisions: list, sch: Schedule | None = None):
        """Per-store features of a candidate (None when it does not schedule), cached."""
        key = _key(decisions)
        if key not in self.rows:
            try:
                sch = sch or apply_candidate(self.func, decisions, self.space, self.threads)
                self.rows[key] = per_store_features(sch.mod["main"])
            except MSCError:
                self.rows[key] = None
        return self.rows[key]

    def _train(self, decisions: list, secs: float, sch: Schedule | None = None) -> None:
        if self.training.has(self._tag(decisions)):
            return
        rows = self._rows_of(decisions, sch)
        if rows is not None:
            # times on different thread counts are different workloads to the model
            self.training.add(f"{self.wkey}|{self.threads}", rows, secs, self._tag(decisions))

    def record_baseline(self, secs: list) -> None:
        """The untuned function as an empty trace: the database's best is never slower."""
        if not self.has_baseline:
            self.db.commit_record(self.workload, TuningRecord(Trace(), secs, self.target,
                                                              self._args_info()))
            self.has_baseline = True

    def _cutoff(self) -> float | None:
        """Candidates 4x slower than the best so far are not worth timing precisely."""
        valid = [v[1] for v in self.measured.values() if v[1] < FAILED]
        return 4 * min(valid) if valid else None

    def _args_info(self) -> list:
        return [["TENSOR", b.dtype, [int(d) for d in a.shape]]
                for b, a in zip(self.func.buffers, self.task.args)]

    def propose(self, n: int) -> list:
        head = [d for d in self.starts if _key(d) not in self.measured]
        pool: dict = {_key(d): d for d in head}
        valid = sorted((v for v in self.measured.values() if v[1] < FAILED),
                       key=lambda v: v[1])
        for _ in range(max(8 * n, 64)):
            if valid and self.rng.random() < 0.5:
                parent = self.rng.choice(valid[:_TOP_K])[0]
                cand = _mutate(self.rng, self.specs, parent)
            else:
                cand = _sample(self.rng, self.specs)
            if _key(cand) not in self.measured:
                pool.setdefault(_key(cand), cand)
        return self._rank(list(pool.values()), n, len(head))

    def _rank(self, pool: list, n: int, first: int) -> list:
        head, rest = pool[:first], pool[first:]
        if rest and not isinstance(self.model, RandomModel) and \
                self.training.valid_count() >= 4:
            rest = self._predicted_order(rest)
            explore = [c for c in rest if self.rng.random() < _EPS_GREEDY]
            rest = explore + [c for c in rest if c not in explore]
        else:
            self.rng.shuffle(rest)
        return (head + rest)[:n]

    def _predicted_order(self, pool: list) -> list:
        """``pool`` best predicted first, by the model fit on the training set; candidates
        that do not schedule are dropped."""
        self.training.fit(self.model)
        scored = [(d, r) for d in pool if (r := self._rows_of(d)) is not None]
        if not scored:
            return []
        x = np.concatenate([r for _, r in scored])
        groups = np.concatenate([np.full(len(r), k) for k, (_, r) in enumerate(scored)])
        scores = self.model.predict(x, groups)
        return [scored[i][0] for i in np.argsort(-scores, kind="stable")]

    def run_one(self, decisions: list) -> float:
        trace, error, secs, sch = None, "", [FAILED], None
        try:
            sch = apply_candidate(self.func, decisions, self.space, self.threads)
            trace = sch.trace
            secs = self.popen(sch.mod["main"], self._cutoff()) if self.popen is not None \
                else measure(self.task, sch.mod["main"], self.min_repeat_ms,
                             cutoff=self._cutoff())
        except (CandidateError, MSCError) as exc:
            error = str(exc) if isinstance(exc, CandidateError) else f"schedule: {exc}"
            self.failures += 1
            LOG.warning("%s: candidate %s failed: %s", self.name, decisions, error)
        trace = trace if trace is not None else Trace()
        self.db.commit_record(self.workload, TuningRecord(trace, secs, self.target,
                                                          self._args_info(), error))
        mean = sum(secs) / len(secs)
        self.measured[_key(decisions)] = (decisions, mean)
        if sch is not None:
            self._train(decisions, mean, sch)
        return mean


def search(func, db: JSONDatabase, target: str, budget: int, per_iter: int, cost_model,
           seed: int = 0, min_repeat_ms: float = 40.0, name: str = "main",
           time_budget_s: float | None = None, runner: str = "local",
           timeout: float = 60.0, space=None, analytic_starts: bool = True) -> SearchResult:
    """Measure up to ``budget`` new candidates of ``func``; the database keeps them all.
    ``runner="popen"`` measures them in a worker process (a crash or a hang of more than
    ``timeout`` seconds costs one candidate). ``space``: a function of a Schedule whose
    sampling instructions define the candidates (default: msc's sketch, ``apply_sketch``).
    ``analytic_starts=False`` leaves out the analytic starting points (to compare search
    strategies from random samples alone)."""
    start = time.perf_counter()
    s = _Search(func, db, target, cost_model, seed, min_repeat_ms, name, runner, timeout,
                space, analytic_starts)
    try:
        with num_threads(s.threads):  # candidates run as they will: on the target's threads
            return _loop(s, budget, per_iter, start, time_budget_s, func, min_repeat_ms)
    finally:
        if s.popen is not None:
            s.popen.close()


def _loop(s: _Search, budget: int, per_iter: int, start: float, time_budget_s, func,
          min_repeat_ms: float) -> SearchResult:
    untuned = measure(s.task, func, min_repeat_ms)
    s.record_baseline(untuned)
    trials = 0
    with progress(total=budget, desc=f"tune {s.name}", unit="trial") as bar:
        while trials < budget:
            batch = s.propose(min(per_iter, budget - trials))
            if not batch:
                break  # the whole space is measured
            for cand in batch:
                s.run_one(cand)
                trials += 1
                bar.update(1)
                if time_budget_s is not None and time.perf_counter() - start > time_budget_s:
                    budget = trials
                    break
            s.training.save()
    valid = [v[1] for v in s.measured.values() if v[1] < FAILED]
    return SearchResult(s.name, trials, s.failures, min(valid) if valid else FAILED,
                        min(untuned), time.perf_counter() - start)
