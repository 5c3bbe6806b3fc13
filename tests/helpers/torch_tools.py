"""Tools of the from_torch tests: running a Relax module (msc's VM, or the numpy reference
of every op), flattening torch outputs, and the structure of a module next to TVM's (TVM runs
in a subprocess: it can crash on some inputs, and a crash must not end the test session).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import torch

from msc.tir import expr as tir

CASES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_cases.py")
GEN_TVM027 = os.path.join(os.path.dirname(CASES_FILE), os.pardir, "relax", "data", "tvm027",
                          "gen_tvm027.py")


# --------------------------------------------------------------------------------------------
# Evaluating a Relax module: the VM (relax.build) and the numpy references of the ops.


def run_vm(mod, inputs) -> list:
    """Build ``mod`` and run ``main`` on the VM; returns the flat list of outputs."""
    from msc import relax

    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    return list(_leaves(vm["main"](*inputs)))


def run_relax(mod, inputs) -> list:
    """Evaluate ``mod["main"]`` on numpy inputs with the numpy reference of each op; returns
    the flat list of outputs."""
    from msc import relax
    from msc.relax.op import numpy_ref

    func = mod["main"]
    env, dims = {}, {}
    for param, value in zip(func.params, inputs):
        env[param] = value
        for dim, size in zip(param.struct_info.values, value.shape):
            if isinstance(dim, tir.Var):
                dims[dim.name] = size

    def value_of(expr):
        if isinstance(expr, relax.Var):
            return env[expr]
        if isinstance(expr, relax.Constant):
            return expr.data
        if isinstance(expr, relax.Tuple):
            return tuple(value_of(e) for e in expr.fields)
        if isinstance(expr, relax.TupleGetItem):
            return value_of(expr.tuple_value)[expr.index]
        if isinstance(expr, relax.ShapeExpr):
            return tuple(int(tir.evaluate(v, dims)) for v in expr.values)
        if isinstance(expr, relax.PrimValue):
            return tir.evaluate(expr.value, dims)
        if isinstance(expr, relax.Call):
            return numpy_ref.evaluate_call(expr, [value_of(a) for a in expr.args])
        return getattr(expr, "value", expr)

    for block in func.body.blocks:
        for binding in block.bindings:
            env[binding.var] = value_of(binding.value)
    out = value_of(func.body.body)
    return list(_leaves(out))


def _leaves(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    else:
        yield np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def torch_leaves(value) -> list:
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [leaf.detach().numpy() for leaf in leaves if isinstance(leaf, torch.Tensor)]


# --------------------------------------------------------------------------------------------
# Structure: the op sequence and struct info of each binding.


def structure(mod) -> dict:
    """[(value kind or op name, struct info)] per binding, plus the function's return."""
    from msc import relax
    from msc.relax.printer import sinfo_to_str

    func = mod["main"]
    rows = []
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            kind = value.op.name if isinstance(value, relax.Call) else type(value).__name__
            rows.append([kind, sinfo_to_str(binding.var.struct_info)])
    return {"bindings": rows, "params": [sinfo_to_str(p.struct_info) for p in func.params]}


_TVM_SCRIPT = r"""
import json, sys, importlib.util
spec = importlib.util.spec_from_file_location("cases", sys.argv[1])
cases = importlib.util.module_from_spec(spec)
sys.modules["cases"] = cases
spec.loader.exec_module(cases)
spec = importlib.util.spec_from_file_location("gen_tvm027", sys.argv[2])
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)
import torch, tvm
from tvm import relax
from tvm.relax.frontend.torch import from_fx
for line in sys.stdin:
    name, dynamic = json.loads(line)
    case = cases.CASES[name]
    try:
        info = []
        dims = {}
        for shape, dtype in case.input_info(dynamic):
            shape = [dims.setdefault(d, tvm.tirx.Var(d, "int64")) if isinstance(d, str) else d
                     for d in shape]
            info.append((shape, dtype))
        with torch.no_grad():
            mod = from_fx(torch.fx.symbolic_trace(case.model()), info)
        func = mod["main"]
        rows = []
        for block in func.body.blocks:
            for b in block.bindings:
                v = b.value
                kind = v.op.name if isinstance(v, relax.Call) else type(v).__name__
                rows.append([kind, str(b.var.ty)])
        out = {"bindings": rows, "params": [str(p.ty) for p in func.params],
               "script": mod.script(),
               "constants": [[str(c.dtype), c.tolist()] for c in gen.metadata_constants(mod)]}
    except Exception as err:
        out = {"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    print(json.dumps([name, dynamic, out]), flush=True)
"""


# TVM prints static dims next to symbolic ones inside tuples as T.int64(4).
_INT64 = re.compile(r"T\.int64\((\d+)\)")


def _run(cmd, input, capture_output, text, timeout):
    """subprocess.run; a run that times out counts as a crash of the key it was on."""
    try:
        return subprocess.run(cmd, check=False, input=input, capture_output=capture_output, text=text,
                              timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        return subprocess.CompletedProcess(cmd, -9, out, "timeout")


def tvm_structures(keys: list, timeout: float = 300) -> dict:
    """TVM's structure for each (case name, dynamic) key, computed in subprocesses; a key
    whose run crashed the interpreter maps to {"error": "crash"}."""
    results: dict = {}
    pending = list(keys)
    while pending:
        proc = _run(
            [sys.executable, "-c", _TVM_SCRIPT, CASES_FILE, GEN_TVM027],
            "".join(json.dumps(list(k)) + "\n" for k in pending), True, True, timeout)
        for line in proc.stdout.splitlines():
            if line.startswith("["):
                name, dynamic, out = json.loads(_INT64.sub(r"\1", line).replace("T.Tuple(", "R.Tuple("))
                results[(name, dynamic)] = out
        done = [k for k in pending if k in results]
        pending = [k for k in pending if k not in results]
        if pending and not done:  # the script itself fails: report it for every key
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            results.update({k: {"error": f"TVM script failed: {tail[0]}"} for k in pending})
            break
        if pending:  # the first key without a result crashed the interpreter
            results[pending[0]] = {"error": f"crash (exit {proc.returncode})"}
            pending = pending[1:]
    return results
