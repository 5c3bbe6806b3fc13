"""Cases of tests/backend/test_index_safety.py, run in a child process so that a crash fails
the test instead of killing pytest::

    python -m tests.backend.index_safety_cases gather      # one JSON line per case

Each case builds one op with ``relax.build`` (index tensors are function parameters, so the
kernels see them only at run time), runs it in the VM and compares with the op's numpy fact.
Verdicts: ``value`` (msc equals numpy), ``error`` (both refuse: numpy raises, msc raises an
msc.errors exception), else ``garbage`` (numpy raises, msc returns a value), ``mismatch``,
``spurious`` (msc raises where numpy answers) or ``foreign`` (an exception outside msc.errors).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from msc import relax
from msc.errors import MSCError
from msc.relax.op import numpy_ref
from msc.relax.op.facts import load_facts
from msc.relax.op.registry import OPS, make_call

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
X = np.arange(12, dtype="float32").reshape(3, 4) + 1


def index_values(dim: int, dtype: str = "int64") -> dict:
    """Two indices per kind: in range, negative in range, past the end, too negative, huge."""
    info = np.iinfo(dtype)
    return {"valid": [0, dim - 1], "neg": [-1, -dim], "over": [1, dim], "under": [0, -dim - 1],
            "huge": [info.max, 0], "tiny": [0, info.min]}


def _arr(values, dtype="int64"):
    return np.array(values, dtype)


def _cases_take():
    for kind, k in index_values(3).items():
        for mode in ("fast", "clip", "wrap"):
            yield f"take-{mode}-{kind}", "take", [X, _arr(k)], [], {"axis": 0, "mode": mode}
    for kind, k in index_values(4, "int32").items():
        yield f"take-axis1-int32-{kind}", "take", [X, _arr(k, "int32")], [], {"axis": 1}
        yield f"embedding-{kind}", "msc.embedding", [_arr(k, "int32")[:, None], X.T.copy()], [], {}


def _cases_empty():
    """Indices into an empty axis: no element to clamp to (numpy raises)."""
    empty, k = np.zeros((0, 4), "float32"), _arr([0])
    yield "take-empty-axis", "take", [empty, k], [], {"axis": 0}
    yield "take-empty-clip", "take", [empty, k], [], {"axis": 0, "mode": "clip"}
    yield "embedding-empty-table", "msc.embedding", [k, empty], [], {}
    yield "index_tensor-empty", "index_tensor", [empty, [k]], [], {}
    yield "gather_nd-empty", "gather_nd", [empty, _arr([[0, 1]])], [], {}
    yield ("scatter_nd-empty", "scatter_nd", [empty, _arr([[0]]), np.ones((1, 4), "float32")],
           [], {"reduction": "update"})
    yield ("scatter_elements-empty", "scatter_elements",
           [np.zeros((2, 0), "float32"), np.zeros((2, 0), "int64"), np.zeros((2, 0), "float32")],
           [], {"axis": 1, "reduction": "update"})


def _cases_gather():
    for kind, k in index_values(4).items():
        rows = _arr([k] * 3)
        yield f"gather_elements-{kind}", "gather_elements", [X, rows], [], {"axis": 1}
        yield f"gather_nd-col-{kind}", "gather_nd", [X, _arr([[0, k[0]], [2, k[1]]])], [], {}
        yield f"index_tensor-{kind}", "index_tensor", [X.T.copy(), [_arr(k)]], [], {}
    for kind, k in index_values(3).items():
        yield f"gather_nd-row-{kind}", "gather_nd", [X, _arr([[k[0]], [k[1]]])], [], {}
        yield f"one_hot-{kind}", "one_hot", [_arr(k)], [1.0, 0.0], {"depth": 3}


def _cases_scatter():
    upd = np.full((2, 4), -5.0, "float32")
    for kind, k in index_values(3).items():
        rows = _arr([[k[0]] * 4, [k[1]] * 4])
        for red in ("update", "add"):
            yield (f"scatter_elements-{red}-{kind}", "scatter_elements", [X, rows, upd], [],
                   {"axis": 0, "reduction": red})
        yield (f"scatter_nd-{kind}", "scatter_nd", [X, _arr([[k[0]], [k[1]]]), upd], [],
               {"reduction": "update"})
        for acc in (False, True):
            yield (f"index_put-acc{int(acc)}-{kind}", "index_put",
                   [X, [_arr(k), _arr([0, 3])], upd[0, :2].copy()], [], {"accumulate": acc})


def _cases_slice():
    x = np.arange(24, dtype="float32").reshape(4, 6)
    specs = [([10], [20], [1]), ([-10], [10], [1]), ([5], [-10], [-1]), ([I64_MAX], [I64_MIN],
             [-1]), ([I64_MIN], [I64_MAX], [2]), ([3], [0], [-2])]
    for n, (b, e, s) in enumerate(specs):
        consts = [relax.const(_arr(v)) for v in (b, e, s)]
        yield f"dynamic_strided_slice-const-{n}", "dynamic_strided_slice", [x], consts, {}
        yield (f"dynamic_strided_slice-tensor-{n}", "dynamic_strided_slice",
               [x, _arr(b), _arr(e), _arr(s)], [], {})
        yield f"strided_slice-{n}", "strided_slice", [x], [(1,), tuple(b), tuple(e), tuple(s)], {}
    for kind, k in index_values(6).items():
        lengths = _arr([k[0], k[1], 2, 3]) if kind != "valid" else _arr([0, 6, 2, 3])
        yield (f"reverse_sequence-{kind}", "reverse_sequence", [x, lengths], [],
               {"seq_axis": 1, "batch_axis": 0})
    for k in (1, 6, 7, 100):
        yield f"topk-k{k}", "topk", [x], [], {"k": k, "axis": -1}
    yield "nonzero-zeros", "nonzero", [np.zeros((3, 2), "float32")], [], {}
    yield "nonzero-some", "nonzero", [np.eye(3, dtype="float32")], [], {}


FAMILIES = {"take": _cases_take, "gather": _cases_gather, "scatter": _cases_scatter,
            "slice": _cases_slice, "empty": _cases_empty}


def _param(name: str, a):
    if isinstance(a, list):
        return relax.Tuple([_param(f"{name}_{i}", t) for i, t in enumerate(a)])
    return relax.Var(name, relax.TensorStructInfo(a.shape, str(a.dtype)))


def _run_msc(op, tensors, args, attrs):
    params = [_param(f"a{i}", t) for i, t in enumerate(tensors)]
    leaves = [v for p in params for v in (p.fields if isinstance(p, relax.Tuple) else [p])]
    bb = relax.BlockBuilder()
    with bb.function("main", leaves):
        with bb.dataflow():
            out = bb.emit_output(make_call(op, *params, *args, **attrs))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    flat = [t for a in tensors for t in (a if isinstance(a, list) else [a])]
    return relax.VirtualMachine(ex, relax.cpu())["main"](*flat)


def _run_numpy(op, tensors, args, attrs):
    params = [_param(f"a{i}", t) for i, t in enumerate(tensors)]
    call = relax.BlockBuilder().normalize(make_call(op, *params, *args, **attrs))
    rest = [numpy_ref.expr_value(a) for a in call.args[len(tensors):]]
    return numpy_ref.evaluate_call(call, list(tensors) + rest)


def _as_tuple(v) -> tuple:
    v = v if isinstance(v, (tuple, list)) else (v,)
    return tuple(np.asarray(getattr(t, "numpy", lambda t=t: t)()) for t in v)


def verdict(op, tensors, args, attrs) -> tuple[str, str]:
    try:
        want = _as_tuple(_run_numpy(op, tensors, args, attrs))
    except (IndexError, ValueError) as exc:
        want = exc
    try:
        got = _as_tuple(_run_msc(op, tensors, args, attrs))
    except MSCError as exc:
        return ("error" if isinstance(want, Exception) else "spurious"), str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - reported as the finding it is
        return "foreign", f"{type(exc).__name__}: {exc}"[:300]
    if isinstance(want, Exception):
        return "garbage", f"numpy: {want}; msc returned {got}"[:300]
    same = len(got) == len(want) and all(
        g.shape == w.shape and np.array_equal(g, w) for g, w in zip(got, want))
    return ("value" if same else "mismatch"), "" if same else f"{got} != {want}"[:300]


def main(family: str) -> None:
    load_facts("numpy")
    assert all(op in OPS for op in ("take", "msc.embedding", "one_hot"))
    for name, op, tensors, args, attrs in FAMILIES[family]():
        result, detail = verdict(op, tensors, args, attrs)
        print(json.dumps({"case": name, "op": op, "verdict": result, "detail": detail}),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
