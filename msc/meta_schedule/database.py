"""The tuning database: two JSON-lines files in ``work_dir``, in MetaSchedule's layout.

- ``database_workload.json``: one line per function, ``[workload hash, TVMScript text]``;
- ``database_tuning_record.json``: one line per measured candidate, ``[workload index,
  [trace, run_secs, target, args_info]]``, the target as TVM's JSON config
  (``{"kind": "llvm", "tag": "", "keys": ["cpu"], "num-cores": 1}``; a target string of an
  older msc file is read too); a candidate that failed to build, run or match the reference
  has ``run_secs`` ``[1e10]`` and never wins. A record line loads in TVM 0.27
  (``TuningRecord.from_json``) and TVM's load here (``TuningRecord.from_json``).

Lines are appended and flushed as they are measured, so an interrupted run keeps what it
measured and a later run with the same ``work_dir`` starts from it. A line that does not
parse is logged and skipped, never fatal (TVM's JSONDatabase rejects the whole file)::

    db = JSONDatabase(work_dir="out/tune")
    best = db.best(func, "llvm")       # the fastest valid TuningRecord, or None
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass

from ..errors import MSCError
from ..s_tir.schedule import Schedule, Trace
from .target import same_target, target_config, target_text

__all__ = ["FAILED", "JSONDatabase", "TuningRecord", "workload_key"]

LOG = logging.getLogger("msc.meta_schedule")
FAILED = 1e10  # run_secs of a candidate that failed (TVM's sentinel)


def workload_key(func) -> str:
    """Structural key of a prim func: the hash of its text printed under one name."""
    return hashlib.sha256(func.script("main").encode()).hexdigest()[:32]


@dataclass
class TuningRecord:
    trace: Trace
    run_secs: list
    target: str
    args_info: list
    error: str = ""

    @property
    def valid(self) -> bool:
        return bool(self.run_secs) and max(self.run_secs) < FAILED

    @property
    def mean_secs(self) -> float:
        return sum(self.run_secs) / len(self.run_secs) if self.run_secs else FAILED

    def as_json(self) -> list:
        extra = [self.error] if self.error else []
        return [self.trace.as_json(), list(self.run_secs), target_config(self.target),
                self.args_info, *extra]

    @staticmethod
    def from_json(entry) -> TuningRecord:
        """A record from its JSON (``[trace, run_secs, target, args_info]``, as msc or TVM
        writes it; ValueError / TypeError / MSCError on a malformed one)."""
        trace, run_secs, target, args_info, *rest = entry
        return TuningRecord(Trace.from_json(trace), [float(s) for s in run_secs or []],
                            target_text(target), args_info or [],
                            str(rest[0]) if rest else "")


class JSONDatabase:
    """Workloads and tuning records of ``work_dir`` (created if missing)."""

    def __init__(self, work_dir: str | None = None, *, path_workload: str | None = None,
                 path_tuning_record: str | None = None):
        work_dir = work_dir or "."
        os.makedirs(work_dir, exist_ok=True)
        self.path_workload = path_workload or os.path.join(work_dir, "database_workload.json")
        self.path_tuning_record = path_tuning_record or os.path.join(
            work_dir, "database_tuning_record.json")
        self.workloads: list = []         # [key, text]
        self.records: dict = {}           # workload index -> [TuningRecord]
        self.skipped = 0
        self._load()

    # ------------------------------------------------------------------ files
    def _lines(self, path: str):
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        self._skip(path, number, exc)

    def _skip(self, path: str, number: int, exc) -> None:
        self.skipped += 1
        LOG.warning("%s:%d: skipped a bad line (%s)", path, number, exc)

    def _load(self) -> None:
        for entry in self._lines(self.path_workload):
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
                self.workloads.append(entry)
            else:
                self._skip(self.path_workload, len(self.workloads) + 1, "not [key, text]")
        for entry in self._lines(self.path_tuning_record):
            try:
                index, body = entry
                record = TuningRecord.from_json(body)
                if not 0 <= int(index) < len(self.workloads):
                    raise ValueError(f"workload index {index} out of range")
            except (ValueError, TypeError, IndexError, MSCError) as exc:  # skip, keep the rest
                self._skip(self.path_tuning_record, 0, exc)
                continue
            self.records.setdefault(int(index), []).append(record)

    def _append(self, path: str, entry) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()

    # ------------------------------------------------------------------ API
    def commit_workload(self, func) -> int:
        key = workload_key(func)
        for index, (known, _) in enumerate(self.workloads):
            if known == key:
                return index
        self.workloads.append([key, func.script("main")])
        self._append(self.path_workload, self.workloads[-1])
        return len(self.workloads) - 1

    def has_workload(self, func) -> bool:
        key = workload_key(func)
        return any(known == key for known, _ in self.workloads)

    def commit_record(self, workload: int, record: TuningRecord) -> None:
        self.records.setdefault(workload, []).append(record)
        self._append(self.path_tuning_record, [workload, record.as_json()])

    def records_of(self, func, target: str | None = None) -> list:
        """Every record of ``func`` (for ``target`` when given), in commit order."""
        key = workload_key(func)
        index = next((i for i, (k, _) in enumerate(self.workloads) if k == key), None)
        records = self.records.get(index, []) if index is not None else []
        return [r for r in records if target is None or same_target(r.target, target)]

    def get_top_k(self, func, k: int, target: str | None = None) -> list:
        valid = [r for r in self.records_of(func, target) if r.valid]
        return sorted(valid, key=lambda r: r.mean_secs)[:k]

    def best(self, func, target: str | None = None) -> TuningRecord | None:
        top = self.get_top_k(func, 1, target)
        return top[0] if top else None

    def get_all_tuning_records(self) -> list:
        return [r for records in self.records.values() for r in records]

    def __len__(self) -> int:
        return len(self.get_all_tuning_records())

    def query_schedule(self, mod, target=None, workload_name: str = "main"):
        """A Schedule of ``mod`` with the best replayable record of ``mod[workload_name]``
        applied (TVM's Database.query_schedule), or None without one."""
        sch = Schedule(mod)
        sch.work_on(workload_name)
        func = sch.mod[workload_name]
        for record in self.get_top_k(func, 4, None if target is None else str(target)):
            trial = sch.copy()
            try:
                record.trace.apply_to_schedule(trial)
                return trial
            except MSCError as exc:  # a record of an older msc: try the next best
                LOG.warning("%s: a record does not replay (%s)", workload_name, exc)
        return None
