"""QDQ regions that become table lookups on int8 data (after fuse/qdq/fold.py's GEMM folds).

A uint8 / int8 tensor has 256 values. Any region that starts at ``dequantize(xq)`` (per
tensor), runs only elementwise ops whose other inputs are constants (scalars, or per channel
along one axis), and ends in one value (a ``quantize``, or a float) is a function of the
byte alone, per channel: GPT-2's tanh GELU with its seven quantize / dequantize steps,
densenet's pre-activation scale / shift / relu, a requantization between two scales. The
region is evaluated once at build time on the 256 inputs with the ops' numpy facts (the
same float32 steps the fake-quantized graph takes, so the table agrees with it; transcendental
ops may differ in the last float bit, which can move a rounding tie by one step) and runs as
one byte-indexed lookup (kernels/int8/lut.py).

``quantize(concat(dequantize(x_i), ...))`` becomes a concat of the int8 values, each input
copied (equal parameters) or mapped through its requantization table.

    counts = fold_lut(program)        # {"qdq:lut(power,multiply,...)": 12, "qdq:concat": 8}
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ....relax.op.registry import OPS, ops_in, ops_with
from ...dispatch.resolve import numpy_caller
from ...kernels.int8.lut import QConcat, QLut
from ...runtime.program import Node, Program
from ..rewrite import Rewriter, rewriter_of

__all__ = ["fold_lut"]

# Elementwise ops, run on the 256 byte values by their numpy facts; their other inputs are
# constants broadcast numpy's way (scalars, or per channel along a trailing axis) and their
# results float or 8-bit (_absorbable). prelu is left out: its slope runs along its axis attr.
_ELEMENTWISE = (ops_in("unary", "binary", "quant") | ops_with("activation")
                | {"clip", "nn.batch_norm"}) - {"nn.prelu"}
# ops whose 1-D constants run along an attr's axis (not numpy's trailing one), and whose
# numpy fact returns (value, ...): inference batch norm (densenet's pre-activation norms)
_CHANNEL_ATTR = {"nn.batch_norm": "axis"}
_QDTYPES = {"uint8": np.uint8, "int8": np.int8}
_OUT_DTYPES = ("uint8", "int8", "float32")
_MAX_REGION = 48  # nodes scanned after the entry: regions are short chains


def shape_of(value) -> tuple | None:
    values = getattr(value.sinfo, "values", None)
    if values is None or not all(v.is_const for v in values):
        return None
    return tuple(int(v.value) for v in values)


def usable_scale(c) -> bool:
    """A quantization scale the int8 kernels can fold: every element finite and positive.

    A calibrator that saw an infinite value (a causal mask of float32's lowest value added
    to another: GPT-Neo's) writes an infinite scale. The tensor then carries no information
    and the QDQ model's value is NaN arithmetic; such chains stay on the float ops, which
    give onnxruntime's unoptimized answer bit for bit, instead of a kernel's own reading of
    a NaN."""
    c = np.asarray(c)
    return c.size > 0 and c.dtype.kind == "f" and bool(np.all(np.isfinite(c) & (c > 0)))


def _per_tensor(value) -> bool:
    c = value.const
    return isinstance(c, np.ndarray) and c.size == 1 and bool(np.isfinite(c).all())


def _quant_step(node: Node, values) -> bool:
    """A per-tensor quantize / dequantize whose scale the folds can use."""
    return (len(node.ins) == 3 and all(_per_tensor(values[i]) for i in node.ins[1:])
            and usable_scale(values[node.ins[1]].const))


class _Lut:
    def __init__(self, rewriter: Rewriter):
        self.rw = rewriter
        self.program = rewriter.program
        self.values = self.program.values
        self.counts: Counter = Counter()
        self.done: set = set()

    def run(self) -> Counter:
        # concats first: a region before a concat would take the dequantize the concat reads
        # (its exit a float table) and leave a float concat between two quantizes
        for node in self.rw.each():
            if node.site is not None and node.op == "concat":
                self._concat(node)
        for node in self.rw.each():
            if node.site is not None and node.op == "dequantize" and id(node) not in self.done:
                self._region(node)
        return self.counts

    def _entry(self, dq: Node):
        """(xq id, dtype) when ``dq`` dequantizes a whole uint8 / int8 tensor per tensor."""
        if not _quant_step(dq, self.values):
            return None
        dtype = getattr(self.values[dq.ins[0]].sinfo, "dtype", "")
        out = getattr(self.values[dq.out].sinfo, "dtype", "")
        return (dq.ins[0], dtype) if dtype in _QDTYPES and out == "float32" else None

    def _region(self, dq: Node) -> None:
        entry = self._entry(dq)
        shape = shape_of(self.values[dq.out])
        if entry is None or shape is None or not shape:
            return
        nodes = self.rw.block(dq)
        start = nodes.index(dq)
        # every dequantize of the same tensor with the same parameters is an entry too
        key = (dq.ins[0], *(float(self.values[i].const.reshape(-1)[0]) for i in dq.ins[1:]))
        entries = [n for n in nodes[start:start + _MAX_REGION]
                   if n.op == "dequantize" and n.site is not None and self._entry(n)
                   and (n.ins[0], *(float(self.values[i].const.reshape(-1)[0])
                                    for i in n.ins[1:])) == key]
        inside = {n.out for n in entries}
        region, tuples = [], set()
        for node in nodes[start + 1:start + _MAX_REGION]:
            if node.kind == "getitem" and node.index == 0 and node.ins[0] in tuples:
                region.append(node)  # batch norm's value
                inside.add(node.out)
            if node in entries or node.site is None or node.op not in _ELEMENTWISE:
                continue
            if any(i in inside for i in node.ins) and self._absorbable(node, inside, shape):
                region.append(node)
                inside.add(node.out)
                if node.op in _CHANNEL_ATTR and shape_of(self.values[node.out]) is None:
                    tuples.add(node.out)
        exits = [v for v in inside if v not in {n.out for n in entries}
                 and any(r is None or r not in region for r in self.rw.readers(v))]
        if not region or not exits:
            return
        self.done.update(id(n) for n in entries)
        tables = {out: self._table(entries, region, out, shape, entry[1]) for out in exits}
        if any(t is None for t in tables.values()):
            return
        # named by the region as found: a replaced exit no longer reads the nodes feeding it
        feeding = {out: [n for n in region if self._feeds(n, out, region)] for out in tables}
        for out, (table, axis) in tables.items():  # one lookup per value read outside
            kernel = QLut(table, axis)
            self.counts["qdq:lut(" + ",".join(n.op for n in feeding[out] if n.op) + ")"] += 1
            exit_node = next(n for n in region if n.out == out)
            self.rw.replace_node(exit_node, [Node(
                "call", (entry[0],), out, fn=kernel, dps=(self.values[out].sinfo,),
                op=kernel.op, path="native", name=exit_node.name)])
        # the rest only fed the region (and the entries may be left unread)
        self.rw.erase_dead(n.out for n in region if n.out not in tables)

    def _feeds(self, node: Node, out: int, region: list) -> bool:
        return node.out == out or any(r in region and self._feeds(r, out, region)
                                      for r in self.rw.users(node.out))

    def _absorbable(self, node: Node, inside: set, shape: tuple) -> bool:
        out = self.values[node.out]
        tensor = shape_of(out) == shape and getattr(out.sinfo, "dtype", "") in _OUT_DTYPES
        if not tensor and node.op not in _CHANNEL_ATTR:  # batch norm: (value, mean, var)
            return False
        if node.op in ("quantize", "dequantize") and not (  # per tensor or per channel
                len(node.ins) == 3 and usable_scale(self.values[node.ins[1]].const)):
            return False
        for i in _arg_ids(node):
            if i in inside:
                continue
            c = self.values[i].const
            if not isinstance(c, (np.ndarray, int, float)) or np.ndim(c) > len(shape):
                return False
        return True

    def _table(self, entries: list, region: list, out: int, shape: tuple, dtype: str):
        """([C, 256] or [256] table of the exit's dtype, channel axis or None)."""
        rank = len(shape)
        axes = set()
        for n in region:
            consts = [c for i in _arg_ids(n)
                      if isinstance(c := self.values[i].const, np.ndarray)]
            if n.op in _CHANNEL_ATTR:
                if n.site.attrs.get("training"):
                    return None
                axes |= {int(n.site.attrs[_CHANNEL_ATTR[n.op]]) % rank for c in consts
                         if c.size > 1}
                continue
            axes |= {rank - c.ndim + k for c in consts for k, d in enumerate(c.shape) if d > 1}
        if len(axes) > 1 or (axes and rank < 2):
            return None
        axis = axes.pop() if axes else None
        probe_axis = rank - 1 if axis != rank - 1 else rank - 2
        probe_shape = [1] * rank
        probe_shape[probe_axis] = 256
        codes = np.arange(256, dtype=np.uint8).view(_QDTYPES[dtype])
        x = codes.reshape(probe_shape)
        if axis is not None:
            probe_shape[axis] = shape[axis]
            x = np.ascontiguousarray(np.broadcast_to(x, probe_shape))
        env = {entries[0].ins[0]: x}
        try:
            for node in [*entries, *region]:
                if node.kind == "getitem":
                    env[node.out] = env[node.ins[0]]
                    continue
                args = [env.get(i, self.values[i].const) for i in _arg_ids(node)]
                fact = OPS[node.op].facts["numpy"]
                if node.op in _CHANNEL_ATTR:  # (value, mean, var): the value, in float32
                    env[node.out] = np.asarray(fact(args, node.site.attrs)[0], np.float32)
                else:
                    env[node.out] = numpy_caller(fact, node.site)(*args)
        except Exception:  # noqa: BLE001  (an op without a usable numpy fact: leave it)
            return None
        result = np.asarray(env[out])
        if axis is None:
            return np.ascontiguousarray(result.reshape(256)), None
        return np.ascontiguousarray(np.moveaxis(result, (axis, probe_axis), (0, 1))
                                    .reshape(shape[axis], 256)), axis

    def _concat(self, node: Node) -> None:
        """quantize(concat(dequantize(x_i))) -> int8 concat (copies / requant tables)."""
        tup = self.rw.producer(node.ins[0])
        q = self.rw.readers(node.out)
        if (tup is None or tup.kind != "tuple" or len(q) != 1 or q[0] is None
                or q[0].op != "quantize" or not _quant_step(q[0], self.values)):
            return
        qnode = q[0]
        out_dtype = getattr(self.values[qnode.out].sinfo, "dtype", "")
        consts = {k: self._const_bytes(i, qnode) for k, i in enumerate(tup.ins)
                  if self._float_const(i)}
        dqs = [self.rw.producer(i) for k, i in enumerate(tup.ins) if k not in consts]
        if out_dtype not in _QDTYPES or not dqs or any(
                d is None or d.op != "dequantize" or d.site is None or not self._entry(d)
                for d in dqs) or any(c is None for c in consts.values()):
            return
        given = iter(dqs)
        tables = [None if k in consts else self._requant_table(next(given), qnode, out_dtype)
                  for k in range(len(tup.ins))]
        axis = int(node.site.attrs.get("axis", 0)) % len(shape_of(self.values[node.out]) or [0])
        kernel = QConcat(tables, axis, _QDTYPES[out_dtype], consts=consts)
        self.rw.replace_node(qnode, [Node("call", tuple(d.ins[0] for d in dqs), qnode.out,
                                          fn=kernel, dps=(self.values[qnode.out].sinfo,),
                                          op=kernel.op, path="numpy", name=node.name)])
        self.rw.erase(node)
        self.rw.erase_dead()  # the tuple when the concat was its one reader
        self.counts["qdq:concat"] += 1

    def _float_const(self, vid: int) -> bool:
        c = self.values[vid].const
        return isinstance(c, np.ndarray) and c.dtype == np.float32 and c.ndim > 0

    def _const_bytes(self, vid: int, q: Node):
        """A float constant part of a concat (a ViT's class token, its Q / DQ folded when
        the program was built) quantized by the concat's quantize, as the float chain would
        at run time; None unless it has its full shape."""
        c = self.values[vid].const
        if shape_of(self.values[vid]) != c.shape:
            return None
        return np.ascontiguousarray(numpy_caller(OPS["quantize"].facts["numpy"], q.site)(
            c, *(self.values[i].const for i in q.ins[1:])))

    def _requant_table(self, dq: Node, q: Node, out_dtype: str):
        """None when dq's values pass unchanged, else the 256-entry quantize(dequantize)."""
        s_in, z_in = (self.values[i].const.reshape(-1)[0] for i in dq.ins[1:])
        s_out, z_out = (self.values[i].const.reshape(-1)[0] for i in q.ins[1:])
        in_dtype = self._entry(dq)[1]
        if in_dtype == out_dtype and np.float32(s_in) == np.float32(s_out) and z_in == z_out:
            return None
        codes = np.arange(256, dtype=np.uint8).view(_QDTYPES[in_dtype])
        f = numpy_caller(OPS["dequantize"].facts["numpy"], dq.site)(codes, *(
            self.values[i].const for i in dq.ins[1:]))
        return numpy_caller(OPS["quantize"].facts["numpy"], q.site)(f, *(
            self.values[i].const for i in q.ins[1:]))


def _arg_ids(node: Node) -> list:
    """All the call's arguments: a kernel resolved at lowering (batch norm as an affine
    kernel) keeps its constants in the site only."""
    return list(node.ins) if node.site is None else [a.id for a in node.site.args]


def fold_lut(program: Program | Rewriter) -> Counter:
    """Replace ``program``'s int8 elementwise regions and concats by table kernels (through
    the build's rewriter when given one)."""
    return _Lut(rewriter_of(program)).run()
