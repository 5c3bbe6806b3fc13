"""The VirtualMachine: checks inputs, picks the plan for their shapes, runs the instructions.

    ex = relax.build(mod)
    vm = relax.VirtualMachine(ex, relax.cpu())
    out = vm["main"](x, w)                   # numpy arrays or __dlpack__ tensors (no copy)
    out.numpy()                              # NDArray results; tuples for tuple outputs
    vm.time_evaluator("main", number=10, repeat=3)(x, w).mean   # seconds

Before any native code runs, every argument is checked against its parameter's struct info:
count, dtype, rank and each dim. Symbolic dims are bound from the shapes (the same var must
have the same value everywhere); the values of all symbolic dims are the shape signature,
and each signature gets its own plan (buffers, instructions), made once and cached.
Non-contiguous inputs are copied to C order first. One VM can be called from several threads:
each concurrent call takes its own register file (and pooled buffers).

``VirtualMachine(ex, num_threads=2)`` runs each call of that VM with 2 kernel threads
(``msc.backend.runtime.threads.num_threads``, scoped to the calling thread, so VMs with different
counts can run side by side); None uses the process-wide count.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ...errors import RuntimeCallError, ShapeError
from ...relax.struct_info import (
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ...tir import expr as tir
from . import packed, threads
from .arrays import Device, cpu, np_dtype, wrap_result
from .match import match_value
from .plan import ENV, REGS, Plan, make_plan
from .profile import ProfileReport, profile_function
from .timing import BenchmarkResult, time_calls

__all__ = ["BenchmarkResult", "VirtualMachine"]


# ---------------------------------------------------------------------------------------------
# Functions and the VM.


class _PlanEntry:
    """A plan with a stack of free register files (one per concurrent caller)."""

    __slots__ = ("free", "plan")

    def __init__(self, plan: Plan):
        self.plan = plan
        self.free: list = []

    def acquire(self) -> tuple:
        try:
            return self.free.pop()
        except IndexError:
            regs = self.plan.new_registers()
            return regs, list(regs)

    def release(self, regs: list, base: list) -> None:
        regs[:] = base  # drop references to this call's values
        self.free.append((regs, base))


class VMFunction:
    """``vm["main"]``: call it with the function's arguments."""

    def __init__(self, vm: VirtualMachine, name: str):
        self.vm = vm
        self.name = name
        self.program = vm.executable.programs[name]
        self.params = [self.program.values[p].sinfo for p in self.program.params]
        self.names = self.program.param_names
        self.dim_names = _signature_dims(self.params)
        self._entries: dict[tuple, _PlanEntry] = {}
        self._profiled: dict[tuple, _PlanEntry] = {}  # timed plans of vm.profile (profile.py)
        self._exact = _exact_specs(self.params)

    def __repr__(self) -> str:
        return f"VMFunction({self.name!r}, params={self.names})"

    def check_args(self, args) -> tuple[list, dict]:
        if len(args) != len(self.params):
            raise ShapeError(f"{self.name!r} takes {len(self.params)} arguments "
                             f"({', '.join(self.names)}), got {len(args)}", node=self.name)
        env: dict = {}
        owners: dict = {}
        values = [match_value(a, s, env, n, owners)
                  for a, s, n in zip(args, self.params, self.names)]
        return values, env

    def entry(self, env: dict) -> _PlanEntry:
        key = tuple(env.get(d) for d in self.dim_names)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _PlanEntry(
                self.vm.executable.plan(self.name, key, env))
        return entry

    def profiled_entry(self, env: dict) -> _PlanEntry:
        """The plan of this signature with a clock around every instruction (vm.profile);
        made once, apart from the plan normal calls run."""
        key = tuple(env.get(d) for d in self.dim_names)
        entry = self._profiled.get(key)
        if entry is None:
            entry = self._profiled[key] = _PlanEntry(
                make_plan(self.program, env, profile=True))
        return entry

    def __call__(self, *args):
        exact = self._exact
        if exact is not None and len(args) == len(exact) and all(
                type(a) is np.ndarray and a.shape == shape and a.dtype == dtype
                and a.flags.c_contiguous for a, (shape, dtype) in zip(args, exact)):
            values, env = list(args), {}  # what check_args gives such arrays, in a third
        else:
            values, env = self.check_args(args)
        return wrap_result(self.run_checked(values, env), self.vm.device)

    def run_checked(self, values: list, env: dict, entry: _PlanEntry | None = None):
        entry = entry or self.entry(env)
        n = self.vm.num_threads
        if n is None or n == threads.get_num_threads():  # the block would change nothing
            return _run(entry, values, env)
        with threads.num_threads(self.vm.num_threads):
            return _run(entry, values, env)


def _run(entry: _PlanEntry, values: list, env: dict):
    plan = entry.plan
    regs, base = entry.acquire()
    try:
        regs[REGS] = regs
        regs[ENV] = env
        for reg, value in zip(plan.params, values):
            regs[reg] = value
        plan.runner.fn(regs)
        return _unshare(regs[plan.result], plan.constant_ids)
    finally:
        entry.release(regs, base)


def _unshare(value, constant_ids: frozenset):
    """Copies of the executable's constants in a result (tuples walked); the rest as is."""
    if isinstance(value, np.ndarray):
        return value.copy() if id(value) in constant_ids else value
    if isinstance(value, tuple) and constant_ids:
        return tuple(_unshare(v, constant_ids) for v in value)
    return value


def _exact_specs(params) -> list | None:
    """(shape, numpy dtype) of every parameter when all are tensors of constant shape (no
    dims to bind), else None: the call's fast check of plain arrays (match.py otherwise)."""
    specs = []
    for sinfo in params:
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype == "void" or (
                sinfo.values is None or not all(v.is_const for v in sinfo.values)):
            return None
        specs.append((tuple(int(v.value) for v in sinfo.values), np_dtype(sinfo.dtype)))
    return specs


def _signature_dims(params) -> list[str]:
    """Names of the symbolic dims the parameters bind, in order (the plan cache key)."""
    found: dict = {}

    def visit(sinfo):
        if isinstance(sinfo, (TensorStructInfo, ShapeStructInfo)):
            for dim in sinfo.values or ():
                for var in tir.free_vars(dim):
                    found.setdefault(var.name, None)
        elif isinstance(sinfo, TupleStructInfo):
            for f in sinfo.fields:
                visit(f)
        elif isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
            for var in tir.free_vars(sinfo.value):
                found.setdefault(var.name, None)

    for p in params:
        visit(p)
    return list(found)


class VirtualMachine:
    """Runs an :class:`~msc.backend.build.Executable` on the host CPU (TVM's interface)."""

    def __init__(self, rt_mod, device: Device | None = None, memory_cfg=None,
                 profile: bool = False, *, num_threads: int | None = None):
        self.executable = getattr(rt_mod, "executable", rt_mod)
        if num_threads is not None:
            with threads.num_threads(num_threads):  # ValidationError naming num_threads
                pass
        self.num_threads = num_threads
        if isinstance(device, (list, tuple)) and device:  # TVM also takes a device list
            device = device[0]
        self.device = device if isinstance(device, Device) else cpu()
        self._functions: dict[str, VMFunction] = {}
        self._check_packed()

    def _check_packed(self) -> None:
        """Every packed function the module calls must be registered by now."""
        missing = sorted({node.op for prog in self.executable.programs.values()
                          for node in prog.walk()
                          if node.path == "packed" and packed.lookup(node.op) is None})
        if missing:
            known = ", ".join(packed.list_global_func_names()) or "(none)"
            raise RuntimeCallError(f"packed function(s) {missing} are not registered",
                                   key=missing[0],
                                   hint=f"relax.register_func(name, f) first; registered: "
                                        f"{known}")

    def __getitem__(self, name: str) -> VMFunction:
        fn = self._functions.get(name)
        if fn is None:
            if name not in self.executable.programs:
                raise RuntimeCallError(f"no function {name!r} in the executable", key=name,
                                       hint=f"functions: {sorted(self.executable.programs)}")
            fn = self._functions[name] = VMFunction(self, name)
        return fn

    def invoke(self, name: str, *args):
        return self[name](*args)

    def profile(self, *args, func_name: str | None = None, number: int = 1) -> ProfileReport:
        """Run ``func_name`` (default "main") ``number`` times on a plan that times each
        instruction (native kernels one by one) and report time, calls and share per joint.
        TVM's order ``vm.profile("main", *args)`` works too. Normal calls are not slowed:
        they run their own, untimed plan.

        >>> report = vm.profile(x)                       # doctest: +SKIP
        >>> print(report.table()); report.to_dict()      # {joint: ms per run}
        """
        if func_name is None and args and isinstance(args[0], str):
            func_name, args = args[0], args[1:]
        return profile_function(self[func_name or "main"], args, number)

    def time_evaluator(self, func_name: str, dev=None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: int = 0, cooldown_interval_ms: int = 0,
                       repeats_to_cooldown: int = 1, f_preproc: str = "") -> Callable:
        """A function running ``func_name`` ``number`` times per repeat; returns a
        :class:`BenchmarkResult` of seconds per call. Inputs are checked and imported once."""
        fn = self[func_name]

        def evaluate(*args) -> BenchmarkResult:
            values, env = fn.check_args(args)
            secs = []
            for r in range(max(int(repeat), 1)):
                secs += time_calls(lambda: fn.run_checked(values, dict(env)), number, 1,
                                   min_repeat_ms)
                if cooldown_interval_ms and (r + 1) % max(repeats_to_cooldown, 1) == 0:
                    time.sleep(cooldown_interval_ms / 1e3)
            return BenchmarkResult(secs)

        return evaluate

    @property
    def module(self) -> VirtualMachine:
        """The VM itself: TVM's lessons time it as ``vm.module.time_evaluator(...)``."""
        return self

