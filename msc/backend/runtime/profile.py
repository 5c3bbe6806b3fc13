"""``vm.profile``: time, calls and share of the total per joint of a plan.

The profiled plan is the function's normal plan written again with a clock read around every
instruction, and native kernels called one by one instead of in chains (plan_code.py), so
each kernel's time is its own. Normal calls keep their untimed plan::

    report = vm.profile(x)                   # or TVM's order: vm.profile("main", x)
    print(report.table())                    # sorted by time; the VM's own share below
    report.to_dict()                         # {joint: ms per run}: msc view --overlay
    report.to_dict(joints=graph.node_names)  # keys mapped onto an MSCGraph's joints

A row is named after the Relax binding the instruction came from. Bindings the BlockBuilder
named itself (``lv``, ``lv3``: a nested call of one joint, e.g. the conv2d inside
``conv2d = add(conv2d(x, w), b)``) are named after the binding they flow into, so for a
model written by ``to_relax`` the names are the MSCGraph's joints. Epilogues fused into a
kernel (the relu after a conv2d) are listed in the row of the kernel that runs them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import median
from time import perf_counter

from ...errors import ValidationError
from .arrays import wrap_result

__all__ = ["ProfileReport", "ProfileRow", "binding_owners", "instruction_names", "profile_function"]

# Names the BlockBuilder gives bindings it was not given a name for (block_builder._fresh).
_ANONYMOUS = re.compile(r"(lv|gv)\d*")
_NOT_WORD = re.compile(r"\W")


@dataclass
class ProfileRow:
    """One joint: seconds per run (median), instructions run (all runs), their ops and the
    bindings fused into them."""

    joint: str
    seconds: float = 0.0
    calls: int = 0
    ops: list = field(default_factory=list)
    fused: list = field(default_factory=list)
    share: float = 0.0


class ProfileReport:
    """Per-joint rows of ``runs`` profiled runs; ``wall``: seconds of a whole call (median;
    argument checks, plan lookup and result wrapping included)."""

    def __init__(self, function: str, rows: list, runs: int, wall: float):
        self.function = function
        self.runs = runs
        self.wall = wall
        self.rows = sorted(rows, key=lambda r: -r.seconds)
        self.total = sum(r.seconds for r in rows)
        for row in self.rows:
            row.share = row.seconds / self.total if self.total > 0 else 0.0

    def __repr__(self) -> str:
        return (f"ProfileReport({self.function!r}, {len(self.rows)} joints, "
                f"{self.total * 1e3:.3f} ms per run)")

    @property
    def vm_seconds(self) -> float:
        """Seconds per call outside the instructions: the VM's own work and the clock reads
        between instructions (the median call less the sum of the rows' medians)."""
        return max(self.wall - self.total, 0.0)

    @property
    def calls(self) -> list[dict]:
        """The rows in TVM's ``Report.calls`` columns (Name, Duration (us), Percent, Count)."""
        return [{"Name": r.joint, "Duration (us)": r.seconds * 1e6, "Percent": r.share * 100,
                 "Count": r.calls // self.runs, "Ops": "+".join(dict.fromkeys(r.ops))}
                for r in self.rows]

    def csv(self) -> str:
        rows = ["Name,Duration (us),Percent,Count,Ops"]
        rows += [f"{c['Name']},{c['Duration (us)']:.3f},{c['Percent']:.2f},{c['Count']},"
                 f"{c['Ops']}" for c in self.calls]
        return "\n".join(rows) + "\n"

    def to_dict(self, joints=None) -> dict:
        """``{joint: ms per run}``, the overlay shape of ``msc view --overlay``. With
        ``joints`` (an MSCGraph's ``node_names``), keys are those joints (a binding is matched
        by name, else by its identifier spelling: ``batch_norm.0`` was bound as
        ``batch_norm_0``) and rows of no joint are left out."""
        found = {r.joint: r.seconds * 1e3 for r in self.rows}
        if joints is None:
            return found
        named = _joint_names(list(joints))
        out: dict = defaultdict(float)
        for key, ms in found.items():
            if key in named:
                out[named[key]] += ms
        return dict(out)

    def json(self, joints=None) -> str:
        return json.dumps(self.to_dict(joints), indent=1)

    def table(self, top: int | None = None) -> str:
        """Rows sorted by time: ms per run, share, calls per run, us per call, ops."""
        lines = [f"{'joint':<28}{'ms':>9}{'share':>8}{'calls':>7}{'us/call':>9}  op"]
        for row in self.rows[:top]:
            ms = row.seconds * 1e3
            us_per_call = row.seconds * self.runs / row.calls * 1e6
            ops = "+".join(dict.fromkeys(row.ops)) + "".join(f" (+{f})" for f in row.fused)
            lines.append(f"{row.joint[:27]:<28}{ms:>9.4f}{row.share:>8.1%}"
                         f"{row.calls // self.runs:>7}{us_per_call:>9.2f}  "
                         f"{ops}")
        if top is not None and len(self.rows) > top:
            lines.append(f"... {len(self.rows) - top} more joints")
        per_run = self.total * 1e3
        lines.append(f"{'total (instructions)':<28}{per_run:>9.4f}{1:>8.0%}")
        lines.append(f"{'vm (args, plan, results)':<28}{self.vm_seconds * 1e3:>9.4f}"
                     f"  per call, outside the instructions; {self.runs} run(s)")
        return "\n".join(lines)


def _joint_names(joints: list) -> dict:
    """Binding name -> joint: the joint itself, then its identifier spelling if unclaimed."""
    named = {j: j for j in joints}
    for j in joints:
        named.setdefault(_NOT_WORD.sub("_", j), j)
    return named


# ---------------------------------------------------------------------------------------------
# Binding names.


def binding_owners(func) -> dict:
    """Binding name -> the name its row takes: an anonymous binding (``lv3``) used by exactly
    one binding is owned by it, following anonymous ones until a named binding is reached."""
    return _owners(_consumers(func))


def _consumers(func) -> dict:
    consumers: dict = defaultdict(list)
    _collect_consumers(getattr(func, "body", None), consumers)
    return consumers


def _owners(consumers: dict) -> dict:
    owners = {}
    for name in consumers:
        owner, seen = name, {name}
        while _ANONYMOUS.fullmatch(owner) and len(consumers.get(owner, ())) == 1:
            owner = consumers[owner][0]
            if owner in seen:
                break
            seen.add(owner)
        owners[name] = owner if not _ANONYMOUS.fullmatch(owner) else name
    return owners


def _fused(consumers: dict, owners: dict, first: str, last: str) -> list:
    """Named bindings a fused node ran past its first one: the single-consumer path from
    ``first`` to ``last`` (conv2d -> batch_norm -> batch_norm_0 -> relu)."""
    path, name = [], first
    while name != last and len(consumers.get(name, ())) == 1 and len(path) < 64:
        name = consumers[name][0]
        path.append(owners.get(name, name))
    return list(dict.fromkeys(path)) if name == last else [owners.get(last, last)]


def _collect_consumers(seq, consumers: dict) -> None:
    from ...relax.expr import If, SeqExpr
    from ...relax.visitor import used_vars

    if not isinstance(seq, SeqExpr):
        return
    for block in seq.blocks:
        for binding in block.bindings:
            name = binding.var.name_hint
            consumers.setdefault(name, [])
            for var in dict.fromkeys(used_vars(binding.value)):
                consumers[var.name_hint].append(name)
            if isinstance(binding.value, If):
                _collect_consumers(binding.value.true_branch, consumers)
                _collect_consumers(binding.value.false_branch, consumers)


def _relax_function(executable, name: str):
    mod = getattr(executable, "mod", None)
    for gv, func in (mod.functions.items() if mod is not None else ()):
        if getattr(gv, "name_hint", None) == name:
            return func
    return None


def instruction_names(fn, plan) -> list[tuple[str, tuple]]:
    """(row name, bindings fused into it) of each instruction of ``plan``."""
    consumers = _consumers(_relax_function(fn.vm.executable, fn.name))
    owners = _owners(consumers)
    values = fn.program.values
    names = []
    for node in plan.nodes:
        name, last = owners.get(node.name, node.name), values[node.out].name
        fused = _fused(consumers, owners, node.name, last) if last and last != node.name else []
        names.append([name, tuple(f for f in fused if f and f != name)])
    for k, (name, _) in enumerate(names):
        if not name:  # an unnamed shape computation: counted with the node that reads it
            names[k][0] = _reader(plan.nodes, k, names) or f"<{plan.nodes[k].kind}>"
    return [tuple(n) for n in names]


def _reader(nodes: list, k: int, names: list) -> str:
    out = nodes[k].out
    return next((names[j][0] for j in range(k + 1, len(nodes))
                 if out in nodes[j].ins and names[j][0]), "")


# ---------------------------------------------------------------------------------------------
# Running.


def profile_function(fn, args: tuple, number: int = 1) -> ProfileReport:
    """Profile ``number`` calls of ``fn`` (a VMFunction) on ``args`` after one warm-up call.
    Each row's time is its median over the runs (a preempted run on a busy machine does not
    inflate it); calls count every instruction run."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValidationError(f"number={number!r}: profile needs a positive run count",
                              key="number", hint="vm.profile(x, number=10)")
    values, env = fn.check_args(args)
    entry = fn.profiled_entry(env)
    fn.run_checked(values, env, entry)  # warm up: lazy kernels, buffers
    timers = entry.plan.runner.timers
    runs, walls = [], []
    for _ in range(number):
        timers[:] = [0.0] * len(timers)
        start = perf_counter()
        values, env = fn.check_args(args)
        wrap_result(fn.run_checked(values, env, entry), fn.vm.device)
        walls.append(perf_counter() - start)
        runs.append(timers[:])
    return ProfileReport(fn.name, _rows(fn, entry.plan, runs), number, median(walls))


def _rows(fn, plan, runs: list) -> list:
    """Rows with the median over runs of the seconds of each row's instructions."""
    rows: dict = {}
    members: dict = defaultdict(list)
    for k, ((name, fused), node) in enumerate(zip(instruction_names(fn, plan), plan.nodes)):
        row = rows.get(name) or rows.setdefault(name, ProfileRow(name))
        members[name].append(k)
        row.calls += len(runs)
        row.ops.append(node.op or node.kind)
        row.fused.extend(f for f in fused if f not in row.fused)
    for name, row in rows.items():
        row.seconds = median(sum(run[k] for k in members[name]) for run in runs)
    return list(rows.values())
