"""Helpers shared by the codegen tests (tests/codegen/), checked by test_codegen_support.py.

``graph_of_call`` turns one op call (the numpy-reference cases of tests/helpers/numpy_cases.py) into the
graph the Relax graph builder would make for it: tensor arguments become inputs, or weights
under their role (conventions 4.3); shape / scalar / tuple arguments and the call's attrs
become attr strings (conventions 1.2). So each op can go graph -> codegen -> run -> compare
without a frontend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from msc import relax
from msc.frontends.relax.roles import roles_of
from msc.graph import MSCGraph, MSCJoint, MSCTensor, encode_attr
from msc.relax.expr import Constant, PrimValue, ShapeExpr, Tuple
from msc.relax.op import numpy_ref, registry
from msc.relax.op.defs_manipulate import IndexMap
from msc.relax.struct_info import ShapeStructInfo, TupleStructInfo

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")


# --------------------------------------------------------------------------------------------
# One call -> one graph.

def _tensor(name: str, sinfo, alias: str = "") -> MSCTensor:
    if isinstance(sinfo, ShapeStructInfo):  # a shape value: int64 [ndim] (conventions 4.1)
        return MSCTensor(name, "int64", "O", [sinfo.ndim], alias)
    values = sinfo.values
    shape = [int(d) if d.is_const else -1 for d in values] if values is not None else \
        [-1] * sinfo.ndim
    return MSCTensor(name, sinfo.dtype, "", shape, alias)


def _plain(value):
    if isinstance(value, PrimValue):
        value = value.value
    if hasattr(value, "value"):
        value = value.value
    if isinstance(value, ShapeExpr):
        return [int(v) for v in value.values]
    if isinstance(value, Tuple):
        return [_plain(f) for f in value.fields]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def graph_of_call(name: str, args, kwargs, use_weights: bool = True):
    """``(graph, inputs, weights, expected)`` for ``relax.op.<name>(*args, **kwargs)``."""
    call = relax.BlockBuilder().normalize(registry.make_call(name, *args, **kwargs))
    expected = numpy_ref.evaluate_call(call, [numpy_ref.expr_value(a) for a in call.args])
    roles = roles_of(name, len(call.args))
    nodes, inputs, weights, pairs, attrs, op_weights = [], {}, {}, [], {}, {}

    def add_input(value: Constant) -> None:
        node_name = f"inp_{len(inputs)}"
        tensor = _tensor(f"{node_name}:0", value.struct_info, node_name)
        node = MSCJoint(len(nodes), node_name, "", "input", outputs=[tensor])
        nodes.append(node)
        pairs.append((node, 0))
        inputs[node_name] = value.data

    for arg, role, value in zip(registry.get_op(name).args, roles, call.args):
        if isinstance(value, Constant) and role != "input" and use_weights:
            wname = f"const_{len(weights)}" if weights else "const"
            op_weights[role] = _tensor(wname, value.struct_info, f"{name}.{role}")
            weights[wname] = value.data
        elif isinstance(value, Constant):
            add_input(value)
        elif isinstance(value, Tuple) and all(isinstance(f, Constant) for f in value.fields):
            for field in value.fields:
                add_input(field)
        else:
            attrs[arg.name] = encode_attr(_plain(value))
    for key, value in (call.attrs.items() if call.attrs is not None else ()):
        # an index map is kept printed, as the Relax frontend keeps it (values.attr_string)
        attrs[key] = str(value) if isinstance(value, IndexMap) else encode_attr(_plain(value))
    node_name = name.rsplit(".", 1)[-1]
    sinfo = call.struct_info
    fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) else [sinfo]
    if name == "nn.batch_norm":  # the graph keeps only output 0 (conventions 4.1)
        fields, expected = fields[:1], expected[0]
    outputs = [_tensor(f"{node_name}:{i}", f, node_name if len(fields) == 1 else
                       f"{node_name}_{i}") for i, f in enumerate(fields)]
    nodes.append(MSCJoint(len(nodes), node_name, "", name, attrs, pairs, outputs, op_weights,
                          scope=["block"]))
    graph = MSCGraph("main", nodes, [f"{n}:0" for n in inputs],
                     [t.name for t in outputs])
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    return graph, list(inputs.values()), weights, expected


# --------------------------------------------------------------------------------------------
# Running and comparing.

def relax_build_and_run(mod, inputs: list) -> list[np.ndarray]:
    """Run ``mod["main"]`` on the msc backend (``relax.build`` + ``relax.VirtualMachine``)."""
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    result = vm[mod.get_global_vars()[0].name_hint](*inputs)
    result = result if isinstance(result, (tuple, list)) else [result]
    return [r.numpy() if hasattr(r, "numpy") else np.asarray(r) for r in result]


def torch_run(model, inputs: list) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        result = model(*[torch.from_numpy(np.ascontiguousarray(x)) for x in inputs])
    result = result if isinstance(result, (tuple, list)) else [result]
    return [r.numpy() if isinstance(r, torch.Tensor) else np.asarray(r) for r in result]


def assert_outputs(got: list, want: list, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind in "biu":
            assert g.dtype.kind in "biu", (g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=rtol,
                                       atol=atol, equal_nan=True)


def run_script(path: Path, cwd: str | Path = "/") -> subprocess.CompletedProcess:
    """``python <path>`` in a subprocess, from another directory, msc importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300, check=False)


def ruff_check(path: Path) -> str:
    """``ruff check`` (default rules) of a generated file; "" when clean."""
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--isolated", str(path)],
                            capture_output=True, text=True, check=False)
    return "" if result.returncode == 0 else result.stdout + result.stderr
