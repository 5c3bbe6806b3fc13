"""Re-fusions of what importers spell out, on the writer's node dicts (see onnx_tidy.py):

- ``MatMul`` of a transposed 2-D operand, or scaled by a constant -> ``Gemm`` with
  ``transA`` / ``transB`` / ``alpha`` (``Add`` of a scaled C then folds with ``beta``);
- ``NegativeLogLikelihoodLoss(LogSoftmax(x, axis=1), t)`` -> ``SoftmaxCrossEntropyLoss``
  (its log-probability output too when the graph returns it).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fold_cross_entropy", "fold_gemm_forms", "scalar_const"]

_GEMM_TYPES = {"float16", "float32", "float64", "int32", "int64", "uint32", "uint64"}


def scalar_const(consts: dict, value: str) -> float | None:
    data = consts.get(value)
    if data is None or data.size != 1 or data.dtype.kind != "f":
        return None
    return float(np.asarray(data).reshape(-1)[0])


def _only_user(users: dict, value: str, keep: set) -> bool:
    return value not in keep and len(users.get(value, [])) == 1


def _users(nodes: list[dict]) -> dict:
    found: dict = {}
    for n in nodes:
        for v in n["inputs"]:
            found.setdefault(v, []).append(n)
    return found


def _is_2d(value: str, consts: dict, shapes: dict) -> bool:
    shape = list(np.shape(consts[value])) if value in consts else shapes.get(value)
    return shape is not None and len(shape) == 2


def fold_gemm_forms(nodes: list[dict], consts: dict, keep: set, shapes: dict,
                    dtypes: dict) -> list[dict]:
    """Transposed operands and constant scales of 2-D MatMuls into Gemm attrs."""
    made, users = {o: n for n in nodes for o in n["outputs"]}, _users(nodes)
    for node in nodes:
        if node["op_type"] not in ("MatMul", "Gemm") or node["domain"] or \
                dtypes.get(node["outputs"][0]) not in _GEMM_TYPES or \
                not all(_is_2d(v, consts, shapes) for v in node["inputs"][:2]):
            continue
        for i, flag in ((0, "transA"), (1, "transB")):
            inner = made.get(node["inputs"][i])
            if inner is not None and inner["op_type"] == "Transpose" and \
                    inner["attrs"].get("perm") == [1, 0] and \
                    _only_user(users, inner["outputs"][0], keep):
                _as_gemm(node)
                node["inputs"][i] = inner["inputs"][0]
                node["attrs"][flag] = 1 - node["attrs"].get(flag, 0)
        _absorb_scale(node, users, consts, keep)
    return nodes


def _as_gemm(node: dict) -> None:
    if node["op_type"] == "MatMul":
        node.update(op_type="Gemm", attrs={}, inputs=list(node["inputs"]))


def _absorb_scale(node: dict, users: dict, consts: dict, keep: set) -> None:
    """``Mul(Gemm-or-MatMul(a, b), s)`` with no C yet: alpha *= s; the Mul's readers read it."""
    out = node["outputs"][0]
    if len(node["inputs"]) > 2 or not _only_user(users, out, keep):
        return
    mul = users[out][0]
    if mul["op_type"] != "Mul" or mul["domain"]:
        return
    scale = scalar_const(consts, mul["inputs"][1 - mul["inputs"].index(out)])
    if scale is None:
        return
    _as_gemm(node)
    node["attrs"]["alpha"] = float(node["attrs"].get("alpha", 1.0)) * scale
    node["outputs"] = [mul["outputs"][0]]
    mul["outputs"] = [f"{out}.unused"]  # nobody reads it: dropped as dead


def fold_cross_entropy(nodes: list[dict], keep: set, shapes: dict) -> list[dict]:
    made, users = {o: n for n in nodes for o in n["outputs"]}, _users(nodes)
    for node in nodes:
        if node["op_type"] != "NegativeLogLikelihoodLoss" or node["domain"]:
            continue
        soft = made.get(node["inputs"][0])
        if soft is None or soft["op_type"] != "LogSoftmax" or len(
                users.get(soft["outputs"][0], [])) != 1:
            continue
        shape = shapes.get(soft["inputs"][0])
        axis = soft["attrs"].get("axis", -1)
        if not (axis == 1 or (shape is not None and axis in (-1, len(shape) - 1) and
                              len(shape) == 2)):
            continue
        log_prob = soft["outputs"][0]
        node.update(op_type="SoftmaxCrossEntropyLoss",
                    inputs=[soft["inputs"][0], *node["inputs"][1:]],
                    outputs=node["outputs"] + ([log_prob] if log_prob in keep else []))
        soft["outputs"] = [f"{log_prob}.unused"]  # nobody reads it: dropped as dead
    return nodes
