"""What both codegens read from a joint: decoded attrs, arguments bound to the op record, dims
as source expressions (prims), and atomic file writes.

Joint attrs are strings (conventions 1.2); they are decoded with the *op table's* attr types,
so no codegen re-declares an op's attrs or defaults::

    ctx = JointContext(graph, node)         # node.optype == "nn.conv2d"
    ctx.attr("strides")                     # [1, 1]  (the op table says "ints")
    ctx.bind_args()                         # [("input", 0), ("weight", "weight")]
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from msc.errors import MSCError, SerializationError, UnsupportedOpError, ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.relax.op.registry import OPS, REQUIRED, OpDef

from .naming import comment

__all__ = ["JointContext", "PrimRenderer", "baseline_keys", "decode", "find_weight",
           "index_map", "joint_comment", "load_script", "read_config", "save_npz", "unsupported",
           "write_binary_atomic"]

_SCRIPTS = itertools.count()  # fresh module names for load_script
# Weight roles named differently from the op argument they fill (conventions 4.3).
ROLE_OF_ARG = {"moving_mean": "mean", "moving_var": "var"}


# --------------------------------------------------------------------------------------------
# Attr strings -> values, by the op table's types.

def _split(text: str) -> list[str]:
    items = text.split(",")
    return items[:-1] if items and items[-1] == "" else items


def _number(text: str):
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def _bool(text: str) -> bool:
    return text.strip().lower() not in ("0", "false")


def _list(cast):
    return lambda text: [cast(s) for s in _split(text)]


def _axes(text: str):
    return _list(int)(text) if "," in text else int(text)


def _any(text: str):
    return [_number(s) for s in _split(text)] if "," in text else _number(text)


_DECODERS: dict[str, Callable] = {
    "int": int, "float": float, "bool": _bool, "str": str, "dtype": str,
    "ints": _list(int), "floats": _list(float), "axes": _axes, "any": _any,
    # argument kinds given as attrs (ShapeExpr, PrimValue, tuples)
    "shape": _list(int), "prim": _number, "tensor": _any, "tensors": _any,
}


def decode(text: str, kind: str, default=None):
    """An attr string as a value of op-table type ``kind``; ``""`` gives ``default``."""
    if text == "":
        return "" if kind == "str" and default == "" else (None if kind != "str" else default)
    try:
        return _DECODERS[kind](text)
    except (ValueError, KeyError):
        raise ValidationError(f"attr value {text!r} is not a valid {kind}") from None


# --------------------------------------------------------------------------------------------
# layout_transform's index map: the attr is the IndexMap printed, ``T.index_map(lambda n, c:
# (n, c // 4, c % 4))``; it is read back (never evaluated) as its initial vars and final exprs.

_INDEX_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _index_expr_ok(e, params: set) -> bool:
    if isinstance(e, ast.Name):
        return e.id in params
    if isinstance(e, ast.Constant):
        return type(e.value) is int
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _index_expr_ok(e.operand, params)
    return isinstance(e, ast.BinOp) and isinstance(e.op, _INDEX_BINOPS) and \
        _index_expr_ok(e.left, params) and _index_expr_ok(e.right, params)


def index_map(text: str) -> ast.Lambda:
    """``"T.index_map(lambda n, c: (n, c // 4))"`` (or the bare lambda) as its ``ast.Lambda``:
    ``args.args`` are the initial vars, ``body.elts`` the final exprs (+ - * // % on the vars
    and int constants only)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Call) and ast.unparse(tree.func) in ("T.index_map", "index_map") \
            and len(tree.args) == 1 and not tree.keywords:
        tree = tree.args[0]
    if not isinstance(tree, ast.Lambda) or tree.args.vararg or tree.args.kwarg or \
            tree.args.kwonlyargs or tree.args.defaults or tree.args.posonlyargs:
        raise ValidationError(f"index_map {text!r} is not T.index_map(lambda <vars>: (...))",
                              op="layout_transform", key="index_map")
    if not isinstance(tree.body, ast.Tuple):
        tree.body = ast.Tuple([tree.body], ast.Load())
    params = {a.arg for a in tree.args.args}
    bad = [ast.unparse(e) for e in tree.body.elts if not _index_expr_ok(e, params)]
    if bad or len(params) != len(tree.args.args):
        raise ValidationError(f"index_map {text!r}: unsupported index expressions {bad}",
                              op="layout_transform", key="index_map",
                              hint="only + - * // % of the lambda's vars and int constants")
    return tree


# --------------------------------------------------------------------------------------------
# Symbolic dims.

# Prim optype -> (relax template, torch template); binary ops not listed use Python operators.
_PRIM_OPS = {
    "Add": ("({0} + {1})",) * 2, "Sub": ("({0} - {1})",) * 2, "Mul": ("({0} * {1})",) * 2,
    "FloorDiv": ("({0} // {1})",) * 2, "FloorMod": ("({0} % {1})",) * 2,
    "Div": ("tir.truncdiv({0}, {1})", "int({0} / {1})"),
    "Mod": ("tir.truncmod({0}, {1})", "int(math.fmod({0}, {1}))"),
    "Min": ("tir.min({0}, {1})", "min({0}, {1})"), "Max": ("tir.max({0}, {1})", "max({0}, {1})"),
    "if_then_else": ("tir.if_then_else({0}, {1}, {2})", "({1} if {0} else {2})"),
}
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
for _key, _op in _COMPARE.items():
    _PRIM_OPS[_key] = (f'tir.binary("{_key}", {{0}}, {{1}})', f"({{0}} {_op} {{1}})")


class PrimRenderer:
    """Prims as source expressions of the inputs' shapes (conventions 1.3).

    ``shape_ref(input_node_name, out_idx, dim)`` gives the source of one input dim, e.g.
    ``"inp_0.shape[0]"``; ``style`` is ``"relax"`` or ``"torch"``."""

    def __init__(self, graph: MSCGraph, shape_ref: Callable[[str, int, int], str], style: str):
        self.graph, self.shape_ref = graph, shape_ref
        self.column = 0 if style == "relax" else 1

    def prim(self, name: str) -> str:
        prim = self.graph.find_prim(name)
        attrs = prim.attrs
        if prim.optype == "shape":
            return self.shape_ref(attrs["producer"], int(attrs.get("out_idx", "0")),
                                  int(attrs["dim"]))
        if prim.optype == "Int":
            return str(int(attrs["value"]))
        if prim.optype not in _PRIM_OPS:
            raise UnsupportedOpError(f"shape prim {name!r} of optype {prim.optype!r} cannot "
                                     "be written as source", hint="supported: shape, Int, "
                                     + ", ".join(_PRIM_OPS))
        args = [self.prim(p.name) for p in prim.parents]
        return _PRIM_OPS[prim.optype][self.column].format(*args)

    def dim(self, tensor: MSCTensor, i: int):
        """One dim: an int, or the source of its prim expression."""
        prims = tensor.prims
        if prims and not prims[i].lstrip("-").isdigit():
            return self.prim(prims[i])
        value = int(prims[i]) if prims else tensor.shape[i]
        if value < 0:
            raise ValidationError(f"dim {i} is dynamic but has no prim", tensor=tensor.name,
                                  hint="give the tensor prims (conventions 1.9)")
        return value

    def dims(self, tensor: MSCTensor) -> list:
        return [self.dim(tensor, i) for i in range(tensor.ndim)]

    @staticmethod
    def source(dims: list) -> str:
        """``[1, inp_0.shape[0]]`` as source (prim expressions are already source)."""
        return "[" + ", ".join(str(d) for d in dims) + "]"


# --------------------------------------------------------------------------------------------
# Joints against the op table.

class JointContext:
    """A joint read through its op record: typed attrs and the source of each argument."""

    def __init__(self, graph: MSCGraph, node: MSCJoint, op_def: OpDef | None = None):
        self.graph, self.node = graph, node
        self.op_def = op_def if op_def is not None else OPS.get(node.optype)

    @property
    def name(self) -> str:
        return self.node.name

    def raw(self, key: str, kind: str, default=None):
        """A node attr decoded as ``kind`` (for attrs the op record does not declare)."""
        text = self.node.attrs.get(key, "")
        try:
            return default if text == "" else decode(text, kind, default)
        except ValidationError as err:
            raise ValidationError(err.message, node=self.name, key=key) from None

    def attr(self, name: str):
        """An attr of the op record: the node's value, else the record's default."""
        attr_def = next((a for a in self.op_def.attrs if a.name == name), None)
        if attr_def is None:
            raise ValidationError(f"op {self.op_def.name} has no attr {name!r}", node=self.name)
        default = None if attr_def.default is REQUIRED else attr_def.default
        if name not in self.node.attrs:
            return list(default) if isinstance(default, tuple) else default
        return self.raw(name, attr_def.type, default)

    def attrs(self, only_changed: bool = False) -> dict:
        """Every attr of the op record (decoded); ``only_changed`` keeps those the node sets
        to a value other than the default."""
        values = {}
        for a in self.op_def.attrs:
            value = self.attr(a.name)
            default = list(a.default) if isinstance(a.default, tuple) else a.default
            if only_changed and (a.name not in self.node.attrs or value == default):
                continue
            values[a.name] = value
        return values

    def weight_role(self, arg_name: str) -> str | None:
        role = ROLE_OF_ARG.get(arg_name, arg_name)
        return role if role in self.node.weights else None

    def bind_args(self) -> list:
        """Where each op argument comes from, in order: ``("input", i)``, ``("inputs", [i..])``
        for a tuple argument, ``("weight", role)``, ``("value", v)`` (an attr), ``("output",
        None)`` (the output shape) or None (left to its default)."""
        args, pos, n_inputs = [], 0, len(self.node.inputs)
        for i, arg in enumerate(self.op_def.args):
            source = self._bind_one(i, arg, pos, n_inputs)
            if source is not None and source[0] == "input":
                pos += 1
            elif source is not None and source[0] == "inputs":
                pos += len(source[1])
            args.append(source)
        return args

    def _bind_one(self, i: int, arg, pos: int, n_inputs: int):
        if self.weight_role(arg.name):
            return ("weight", self.weight_role(arg.name))
        if arg.kind == "shape" and self.op_def.shape_is_output:  # the joint's output shape
            return ("output", None)
        if arg.kind != "tensor" and self.node.attrs.get(arg.name, "") != "":
            return ("value", self.raw(arg.name, arg.kind))
        if arg.kind == "any" and arg.default is REQUIRED and arg.name in self.node.attrs:
            return ("value", [])  # an empty tuple encodes as "" (e.g. strided_slice's axes)
        if arg.kind == "tensors":
            later = sum(1 for a in self.op_def.args[i + 1:] if a.kind == "tensor"
                        and a.default is REQUIRED and not self.weight_role(a.name))
            return ("inputs", list(range(pos, max(n_inputs - later, pos))))
        if pos < n_inputs and arg.kind != "shape":
            return ("input", pos)
        return None


def joint_comment(node: MSCJoint) -> str:
    """The comment above a joint's code: ``<name>(<optype>): <inputs> -> <outputs>``."""
    inputs = ",".join(t.name for t in node.get_inputs())
    outputs = ",".join(str(t) for t in node.outputs)
    return comment(f"{node.name}({node.optype}): {inputs} -> {outputs}")


def write_nodes(graph, write_node, names: dict, what: str, hint: str) -> None:
    """``write_node`` every node of ``graph``; report every node it cannot write at once."""
    problems = []
    for node in graph.get_nodes():
        try:
            write_node(node)
        except (MSCError, KeyError, ValueError, IndexError) as err:
            problems.append({"op": node.optype, "node": node.name, "why": str(err)})
            names.setdefault(node.name, node.name)  # so later nodes are checked too
    if problems:
        raise unsupported(what, problems, hint)


def unsupported(what: str, problems: list[dict], hint: str) -> UnsupportedOpError:
    """One error listing every node a codegen cannot write (op, node, why)."""
    counts: dict[str, int] = {}
    for p in problems:
        counts[p["op"]] = counts.get(p["op"], 0) + 1
    items = [{**p, "count": counts[p["op"]]} for p in problems]
    return UnsupportedOpError(f"{what} cannot write {len(problems)} node(s)", items=items,
                              hint=hint)


# --------------------------------------------------------------------------------------------
# Files.

def write_binary_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` then move the file into place (never a half-written file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise SerializationError(f"cannot write file: {err}", file=str(target)) from None
        raise


def save_npz(path: str | os.PathLike, arrays: dict) -> None:
    """``np.savez`` of plain arrays (object arrays are refused: the files never pickle)."""
    data = {k: np.asarray(v) for k, v in arrays.items()}
    for key, value in data.items():
        if value.dtype.hasobject:
            raise SerializationError(f"array {key!r} has dtype object", file=str(path),
                                     hint="weights and baselines are numeric arrays")

    def write(tmp: str) -> None:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
            for key, value in data.items():
                with archive.open(key + ".npy", "w", force_zip64=True) as handle:
                    np.lib.format.write_array(handle, value, allow_pickle=False)

    write_binary_atomic(path, write)


# --------------------------------------------------------------------------------------------
# Shared by both codegens.

def find_weight(weights: dict, tensor: MSCTensor) -> np.ndarray:
    for key in (tensor.name, tensor.alias):
        if key and key in weights:
            value = weights[key]
            if hasattr(value, "detach"):
                value = value.detach().cpu().numpy()
            return np.asarray(value)
    raise ValidationError("no data for weight", tensor=tensor.name,
                          hint="weights are keyed by weight name (or alias)")


_CONFIG_KEYS = {"need_test": True, "atol": 1e-5, "rtol": 1e-5}


def read_config(codegen_config: dict | None) -> dict:
    config = dict(_CONFIG_KEYS)
    unknown = sorted(set(codegen_config or {}) - set(config))
    if unknown:
        raise ValidationError(f"unknown codegen_config keys {unknown}",
                              hint=f"known keys: {', '.join(config)}")
    config.update(codegen_config or {})
    return config


def baseline_keys(tensors: list[MSCTensor]) -> list[str]:
    namer_used: set = set()
    keys = []
    for t in tensors:
        key = t.alias or t.name
        while key in namer_used:
            key += "_"
        namer_used.add(key)
        keys.append(key)
    return keys


def load_script(path: Path):
    """Import a generated script (our own output, from its build folder) as a fresh module."""
    spec = importlib.util.spec_from_file_location(f"msc_codegen_{next(_SCRIPTS)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
