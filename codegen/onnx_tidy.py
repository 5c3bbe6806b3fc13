"""Small clean-ups of a written ONNX node list, so that a model read into msc comes back no
larger than it went in: importers spell out what ONNX ops do implicitly (negative indices
wrapped by hand, a layout permuted there and back), and those spellings fold away here.

Each rule works on the writer's node dicts ({"op_type", "inputs", "outputs", ...}) and keeps
the graph outputs; dead nodes are dropped at the end."""

from __future__ import annotations

import numpy as np

__all__ = ["tidy"]

# Ops whose index input (position 1) takes negative indices as counted from the end.
_NEGATIVE_OK = {"Gather", "GatherElements", "ScatterElements"}


def tidy(nodes: list[dict], consts: dict, keep: set[str], shapes: dict,
         dtypes: dict) -> list[dict]:
    """``nodes`` with the rules applied (``keep``: values that must stay, graph outputs;
    ``shapes`` / ``dtypes``: value -> static shape / dtype, where known)."""
    nodes = _unwrap_indices(nodes, consts, shapes)
    nodes = _fold_transposes(nodes, keep)
    nodes = _fold_gemm(nodes, consts, keep, shapes, dtypes)
    return _drop_dead(nodes, keep)


def _producers(nodes: list[dict]) -> dict[str, dict]:
    return {o: n for n in nodes for o in n["outputs"]}


def _consumers(nodes: list[dict]) -> dict[str, list[tuple[dict, int]]]:
    users: dict[str, list] = {}
    for n in nodes:
        for i, v in enumerate(n["inputs"]):
            users.setdefault(v, []).append((n, i))
    return users


def _is_const(consts: dict, value: str, test) -> bool:
    data = consts.get(value)
    return data is not None and data.size == 1 and bool(test(np.asarray(data).reshape(-1)[0]))


def _wraps(reader: dict, index: int, size, shapes: dict) -> bool:
    """Whether adding ``size`` to a negative index is what ``reader`` does itself."""
    shape = shapes.get(reader["inputs"][0])
    axis = reader["attrs"].get("axis", 0)
    return index == 1 and shape is not None and shape[axis] == size


def _unwrap_indices(nodes: list[dict], consts: dict, shapes: dict) -> list[dict]:
    """``Where(Less(i, 0), Add(i, n), i)`` read only as an index by ops that count negative
    indices from the end (along an axis of size n): the ops read ``i`` itself."""
    made, users = _producers(nodes), _consumers(nodes)
    for node in nodes:
        if node["op_type"] != "Where" or len(node["inputs"]) != 3:
            continue
        cond, wrapped, index = node["inputs"]
        less, add = made.get(cond), made.get(wrapped)
        if not (less and add and less["op_type"] == "Less" and add["op_type"] == "Add"):
            continue
        if less["inputs"][0] != index or not _is_const(consts, less["inputs"][1],
                                                       lambda v: v == 0):
            continue
        if index not in add["inputs"]:
            continue
        size = consts.get(add["inputs"][1 - add["inputs"].index(index)])
        if size is None or size.size != 1:
            continue
        size = int(np.asarray(size).reshape(-1)[0])
        readers = users.get(node["outputs"][0], [])
        if readers and all(n["op_type"] in _NEGATIVE_OK and _wraps(n, i, size, shapes)
                           for n, i in readers):
            for reader, i in readers:
                reader["inputs"][i] = index
    return nodes


def _fold_transposes(nodes: list[dict], keep: set[str]) -> list[dict]:
    """``Transpose(Transpose(x, p), q)`` -> one Transpose (none when the two cancel)."""
    made = _producers(nodes)
    for node in nodes:
        if node["op_type"] != "Transpose":
            continue
        inner = made.get(node["inputs"][0])
        if inner is None or inner["op_type"] != "Transpose":
            continue
        p, q = inner["attrs"]["perm"], node["attrs"]["perm"]
        node["attrs"] = {"perm": [p[a] for a in q]}
        node["inputs"] = list(inner["inputs"])
    users = _consumers(nodes)
    for node in nodes:  # an identity Transpose: its readers read its input
        perm = node["attrs"].get("perm") if node["op_type"] == "Transpose" else None
        if perm is not None and perm == sorted(perm) and node["outputs"][0] not in keep:
            _replace_uses(users, node["outputs"][0], node["inputs"][0])
    return nodes


def _shape(value: str, consts: dict, shapes: dict):
    if value in consts:
        return list(np.shape(consts[value]))
    return shapes.get(value)


_GEMM_TYPES = {"float16", "float32", "float64", "int32", "int64", "uint32", "uint64"}


def _fold_gemm(nodes: list[dict], consts: dict, keep: set[str], shapes: dict,
               dtypes: dict) -> list[dict]:
    """``Add(MatMul(a, b), c)`` on 2-D a, b (of a type Gemm takes) with c broadcast to the
    product: one Gemm."""
    made, users = _producers(nodes), _consumers(nodes)
    for node in nodes:
        if node["op_type"] != "Add":
            continue
        for side in (0, 1):
            product = made.get(node["inputs"][side])
            if product is None or product["op_type"] != "MatMul" or product["domain"]:
                continue
            a, b = (_shape(v, consts, shapes) for v in product["inputs"])
            c = _shape(node["inputs"][1 - side], consts, shapes)
            out = product["outputs"][0]
            if dtypes.get(out) not in _GEMM_TYPES:
                continue
            if a is None or b is None or c is None or len(a) != 2 or len(b) != 2 or \
                    out in keep or len(users.get(out, [])) != 1 or len(c) > 2:
                continue
            try:
                if list(np.broadcast_shapes(tuple(c), (a[0], b[1]))) != [a[0], b[1]]:
                    continue
            except ValueError:
                continue
            node.update(op_type="Gemm", attrs={},
                        inputs=[*product["inputs"], node["inputs"][1 - side]])
            break
    return nodes


def _replace_uses(users: dict, old: str, new: str) -> None:
    """Readers of ``old`` read ``new``; ``users`` (``_consumers``) follows, so a chain of
    replacements costs its readers, not the whole node list each time."""
    readers = users.pop(old, [])
    for n in {id(n): n for n, _ in readers}.values():
        n["inputs"] = [new if v == old else v for v in n["inputs"]]
    users.setdefault(new, []).extend(readers)


def _drop_dead(nodes: list[dict], keep: set[str]) -> list[dict]:
    live, kept = set(keep), []
    for node in reversed(nodes):
        if any(o in live for o in node["outputs"]):
            kept.append(node)
            live.update(v for v in node["inputs"] if v)
    return kept[::-1]
