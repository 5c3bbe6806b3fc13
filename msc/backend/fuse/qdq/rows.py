"""QDQ softmax and layer norm chains become one row kernel on bytes (kernels/int8/rows.py).

After the int8 GEMMs of a QDQ transformer fold (fuse/qdq/fold.py), what is left between them
runs in float, a pass per op over the tensor, each on one thread: per attention block ::

    dequantize(s) -> add(mask) -> quantize -> dequantize -> softmax -> quantize
        -> dequantize -> isnan / where -> quantize              (BERT, onnxruntime QDQ)

and per post-norm ``dequantize -> layer_norm -> quantize``. This pass matches those chains
on the top level of a program (every value inside read only by the chain) and replaces each by
one call reading the bytes (and the float mask) and writing the last quantize's bytes. The
optional mask add, the optional quantize round trip before the softmax, and an elementwise
tail after its quantize (ending in a quantize; evaluated once on the 256 codes with the ops'
numpy facts, as fuse/qdq/lut.py does) are taken when present.

    counts = fold_rows(program)      # {"qdq:softmax": 12, "qdq:layer_norm": 25}
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ....relax.op.registry import OPS, ops_in, ops_with
from ...dispatch.resolve import numpy_caller, static_slice
from ...kernels.int8.layout import QPermute, QSlice, word_permutable
from ...kernels.int8.rows import MAX_ROW, QLayerNorm, QSoftmax, quant_params
from ...kernels.norm import affine_const
from ...runtime.program import Node, Program
from ..rewrite import Rewriter, rewriter_of
from .lut import shape_of, usable_scale

__all__ = ["fold_rows", "permute_bytes"]

_QDTYPES = {"uint8": np.uint8, "int8": np.int8}
# ops a tail after the softmax's quantize may hold (with scalar constants): elementwise ops, as
# the exporters' NaN guard (isnan, where) and a requantization (arithmetic, clip, relu) use
_TAIL_OPS = ops_in("unary", "binary", "compare") | ops_with("activation") | {"clip", "where"}
_TAIL_SCAN = 8  # program nodes scanned for the tail


def _dtype(value) -> str:
    return getattr(value.sinfo, "dtype", "")


def _scalar(value):
    c = value.const
    return c.reshape(-1)[0] if isinstance(c, np.ndarray) and c.size == 1 else None


def _arg_ids(node: Node) -> list:
    return list(node.ins) if node.site is None else [a.id for a in node.site.args]


class _Rows:
    def __init__(self, rewriter: Rewriter):
        self.rw = rewriter
        self.program, self.values = rewriter.program, rewriter.program.values
        self.counts: Counter = Counter()

    def run(self) -> Counter:
        folds = {"nn.softmax": self._softmax, "nn.layer_norm": self._norm, "split": self._split,
                 "strided_slice": self._slice}
        for node in self.rw.each():
            fold = folds.get(node.op) if node.site is not None else None
            if fold is not None:
                fold(node)
        return self.counts

    # -- pieces ---------------------------------------------------------------------------
    def _only(self, vid: int, reader: Node) -> bool:
        return self.rw.readers(vid) == [reader]

    def _dequantize(self, vid: int, reader: Node, shared: bool = False):
        """(node, (xq id, dtype, scale, zero)) when ``vid`` is a per-tensor dequantize of
        bytes read only by ``reader`` (or by others too when ``shared``: the chain's entry,
        which stays for them; GPT-2's pre-norm residual reads it)."""
        node = self.rw.producer(vid)
        if (node is None or node.op != "dequantize" or node.site is None or len(node.ins) != 3
                or not self.rw.within(node)
                or not (self._only(vid, reader) or shared and reader in self.rw.readers(vid))
                or _dtype(self.values[vid]) != "float32"):
            return None
        dtype = _dtype(self.values[node.ins[0]])
        s, z = (_scalar(self.values[i]) for i in node.ins[1:])
        if dtype not in _QDTYPES or s is None or z is None or not usable_scale(s):
            return None
        return node, (node.ins[0], dtype, np.float32(s), int(z))

    def _quantize(self, node: Node | None):
        """(scale, zero, dtype) of a per-tensor quantize to bytes."""
        if (node is None or node.op != "quantize" or node.site is None or len(node.ins) != 3
                or not self.rw.within(node)):
            return None
        dtype = _dtype(self.values[node.out])
        s, z = (_scalar(self.values[i]) for i in node.ins[1:])
        if dtype not in _QDTYPES or s is None or z is None or not usable_scale(s):
            return None
        return np.float32(s), int(z), dtype

    def _next_quantize(self, vid: int):
        readers = self.rw.readers(vid)
        if len(readers) != 1 or readers[0] is None:
            return None, None
        return readers[0], self._quantize(readers[0])

    def _replace(self, chain: list, ins: tuple, out: int, kernel, name: str) -> None:
        self.rw.replace_node(self.rw.producer(out), [Node(
            "call", ins, out, fn=kernel, dps=(self.values[out].sinfo,), op=kernel.op,
            path="native", name=name)])
        # the chain's nodes go, now unread; a shared entry stays for its other readers
        self.rw.erase_dead(node.out for node in chain)

    # -- softmax ------------------------------------------------------------------------------
    def _softmax(self, sm: Node) -> None:
        shape = shape_of(self.values[sm.ins[0]])
        if (shape is None or not shape or _dtype(self.values[sm.ins[0]]) != "float32"
                or int(sm.site.attr("axis", -1)) % len(shape) != len(shape) - 1
                or not 0 < shape[-1] <= MAX_ROW):
            return
        chain, v, reader, mid, mask = [sm], sm.ins[0], sm, None, None
        found = self._dequantize(v, reader)
        if found is not None:  # a quantize round trip before the softmax
            dq2, _ = found
            q2 = self.rw.producer(dq2.ins[0])
            mid = self._quantize(q2)
            if mid is not None and self._only(dq2.ins[0], dq2):
                chain += [dq2, q2]
                v, reader = q2.ins[0], q2
            else:
                mid = None
        add = self.rw.producer(v)
        if add is not None and add.op == "add" and self._only(v, reader) and add.site:
            for k in (0, 1):
                entry = self._dequantize(add.ins[k], add, shared=True)
                other = self.values[add.ins[1 - k]]
                mshape = shape_of(other)
                if (entry is not None and shape_of(self.values[entry[1][0]]) == shape
                        and _dtype(other) == "float32" and mshape
                        and mshape[-1] == shape[-1] and len(mshape) <= len(shape)
                        and shape_of(self.values[add.out]) == shape
                        and all(a in (1, b) for a, b in zip(mshape[::-1], shape[::-1]))):
                    mask = (add.ins[1 - k], mshape)
                    chain += [add]
                    v, reader = add.ins[k], add
                    break
        entry = self._dequantize(v, reader, shared=True)
        q4node, q4 = self._next_quantize(sm.out)
        if entry is None or q4 is None:
            return
        dq, (xq, in_dtype, sx, zx) = entry
        if shape_of(self.values[xq]) != shape:
            return
        chain += [dq, q4node]
        end, tail, out_dtype, q6 = q4node.out, None, q4[2], (0, 0, "uint8")
        found = self._tail(q4node, q4[2])
        if found is not None:
            tail_nodes, end, tail, q6 = found
            chain += tail_nodes
            out_dtype = q6[2]
        params = quant_params(sx=sx, zx=zx, q2=mid or (0, 0, "uint8"), q4=q4, q6=q6)
        kernel = QSoftmax(shape, in_dtype, out_dtype, params,
                          None if mask is None else mask[1], mid=mid is not None, tail=tail)
        ins = (xq,) if mask is None else (xq, mask[0])
        self._replace(chain, ins, end, kernel, sm.name)
        self.counts["qdq:softmax"] += 1

    def _tail(self, q4node: Node, dtype: str):
        """(nodes, end value, byte table, the end quantize's (scale, zero, dtype)) of an
        elementwise region from the bytes of ``q4node`` to one quantize, or None."""
        readers = self.rw.readers(q4node.out)
        dq = readers[0] if len(readers) == 1 else None
        if (dq is None or dq.op != "dequantize" or dq.site is None or len(dq.ins) != 3
                or any(_scalar(self.values[i]) is None for i in dq.ins[1:])
                or not usable_scale(_scalar(self.values[dq.ins[1]]))):
            return None
        nodes = self.rw.block(dq)
        start = nodes.index(dq)
        region, inside, end = [readers[0]], {readers[0].out}, None
        for node in nodes[start + 1:start + 1 + _TAIL_SCAN]:
            if not any(i in inside for i in node.ins):
                continue
            if node.op == "quantize" and self._quantize(node) is not None:
                end = node
                break
            if node.site is None or node.op not in _TAIL_OPS or not all(
                    i in inside or _scalar(self.values[i]) is not None for i in _arg_ids(node)):
                return None
            region.append(node)
            inside.add(node.out)
        if end is None or any(r not in region and r is not end for v in inside
                              for r in self.rw.readers(v)):
            return None
        table = self._table(q4node.out, dtype, [*region, end])
        return None if table is None else ([*region, end], end.out, table, self._quantize(end))

    def _table(self, vid: int, dtype: str, region: list):
        """The region evaluated on the 256 codes of ``vid`` (numpy facts)."""
        env = {vid: np.arange(256, dtype=np.uint8).view(_QDTYPES[dtype])}
        try:
            for node in region:
                args = [env.get(i, self.values[i].const) for i in _arg_ids(node)]
                env[node.out] = np.asarray(numpy_caller(OPS[node.op].facts["numpy"],
                                                        node.site)(*args)).reshape(-1)
        except Exception:  # noqa: BLE001  (an op without a usable numpy fact: leave the chain)
            return None
        out = env[region[-1].out]
        return out if out.shape == (256,) else None

    # -- layer norm ---------------------------------------------------------------------------
    def _norm(self, ln: Node) -> None:
        shape = shape_of(self.values[ln.ins[0]])
        if shape is None or not shape or not 0 < shape[-1] <= MAX_ROW:
            return
        axes = sorted({int(a) % len(shape) for a in ln.site.attr("axes") or ()})
        n = shape[-1]
        gamma, beta = affine_const(ln.site, 1, n, "scale"), affine_const(ln.site, 2, n,
                                                                          "center")
        if axes != [len(shape) - 1] or gamma is None or beta is None:
            return
        entry = self._dequantize(ln.ins[0], ln, shared=True)
        qnode, q = self._next_quantize(ln.out)
        if entry is None or q is None:
            return
        dq, (xq, in_dtype, sx, zx) = entry
        eps = np.float32(ln.site.attr("epsilon", 1e-5))
        residual = self._residual(dq, shape)
        if residual is None:
            params = quant_params(sx=sx, zx=zx, q4=q, eps=eps)
            kernel = QLayerNorm(shape, in_dtype, q[2], params, gamma, beta)
            self._replace([dq, ln, qnode], (xq,), qnode.out, kernel, ln.name)
            self.counts["qdq:layer_norm"] += 1
            return
        chain, ins, (a, b), q2 = residual
        params = quant_params(sx=a[2], zx=a[3], sy=b[2], zy=b[3], q2=q2, q4=q, eps=eps)
        kernel = QLayerNorm(shape, a[1], q[2], params, gamma, beta, residual=True)
        self._replace([*chain, dq, ln, qnode], ins, qnode.out, kernel, ln.name)
        self.counts["qdq:add->layer_norm"] += 1

    def _residual(self, dq: Node, shape: tuple):
        """BERT's post-norm: the layer norm's bytes come from ``quantize(dequantize(a) +
        dequantize(b))`` read only by it: (chain nodes, (a, b), their dequantize entries,
        the add's quantize) to fold the add into the row, or None."""
        readers = self.rw.readers(dq.out)
        if not self._only(dq.out, readers[0] if readers else None):
            return None
        q1 = self.rw.producer(dq.ins[0])
        q2 = self._quantize(q1)
        add = self.rw.producer(q1.ins[0]) if q2 is not None else None
        if (add is None or add.op != "add" or add.site is None or len(add.ins) != 2
                or not self._only(q1.out, dq) or not self._only(add.out, q1)
                or q2[2] != _dtype(self.values[dq.ins[0]])):
            return None
        found = [self._dequantize(i, add, shared=True) for i in add.ins]
        if any(f is None or shape_of(self.values[f[1][0]]) != shape for f in found) or (
                found[0][1][1] != found[1][1][1]):
            return None
        chain = [add, q1, found[0][0]] + ([found[1][0]] if found[1][0] is not found[0][0]
                                          else [])
        return chain, (found[0][1][0], found[1][1][0]), (found[0][1], found[1][1]), q2


    # -- split --------------------------------------------------------------------------------
    def _slice(self, sl: Node) -> None:
        """dequantize -> strided_slice (one range of one axis) -> quantize: a slice of the
        bytes (a decoder's rotary halves), copied or through a requantization table."""
        shape = shape_of(self.values[sl.ins[0]])
        entry = self._dequantize(sl.ins[0], sl, shared=True) if shape else None
        bounds = slice_bounds(sl.site, shape) if entry is not None else None
        qnode, q = self._next_quantize(sl.out)
        if bounds is None or q is None:
            return
        dq, (xq, in_dtype, sx, zx) = entry
        table = None
        if q != (sx, zx, in_dtype):
            codes = np.arange(256, dtype=np.uint8).view(_QDTYPES[in_dtype])
            f = numpy_caller(OPS["dequantize"].facts["numpy"], dq.site)(
                codes, *(self.values[i].const for i in dq.ins[1:]))
            table = np.asarray(numpy_caller(OPS["quantize"].facts["numpy"], qnode.site)(
                f, *(self.values[i].const for i in qnode.ins[1:]))).reshape(-1)
        kernel = QSlice(*bounds, table)
        self.rw.replace_node(qnode, [Node("call", (xq,), qnode.out, fn=kernel,
                                          dps=(self.values[qnode.out].sinfo,), op=kernel.op,
                                          path="numpy", name=sl.name)])
        self.rw.erase(sl)
        self.rw.erase_dead()  # the dequantize, when the slices were its readers
        self.counts["qdq:strided_slice"] += 1

    def _split(self, sp: Node) -> None:
        """dequantize -> split -> (getitem -> quantize) per part: slices of the bytes, copied
        (equal parameters) or through a requantization table."""
        shape = shape_of(self.values[sp.ins[0]])
        entry = self._dequantize(sp.ins[0], sp, shared=True) if shape else None
        if entry is None:
            return
        dq, (xq, in_dtype, sx, zx) = entry
        axis = int(sp.site.attr("axis", 0)) % len(shape)
        parts = sp.site.attr("indices_or_sections")
        if isinstance(parts, int):
            if parts <= 0 or shape[axis] % parts:
                return
            parts = [shape[axis] // parts * k for k in range(1, parts)]
        bounds = [0, *(int(i) for i in parts), shape[axis]]
        items = self.rw.readers(sp.out)
        picks = []
        for item in items:
            if item is None or item.kind != "getitem" or len(self.rw.readers(item.out)) != 1:
                return
            qnode = self.rw.readers(item.out)[0]
            q = self._quantize(qnode)
            if q is None or not 0 <= item.index < len(bounds) - 1:
                return
            picks.append((item, qnode, q))
        for item, qnode, (s, z, dtype) in picks:
            table = None
            if (s, z, dtype) != (sx, zx, in_dtype):
                table = self._table(xq, in_dtype, [dq, qnode])
                if table is None:
                    return
            lo, hi = bounds[item.index], bounds[item.index + 1]
            kernel = QSlice(axis, lo, hi, table)
            self.rw.replace_node(qnode, [Node("call", (xq,), qnode.out, fn=kernel,
                                              dps=(self.values[qnode.out].sinfo,),
                                              op=kernel.op, path="numpy", name=item.name)])
            self.rw.erase(item)
        self.rw.erase(sp)
        self.rw.erase_dead()  # the dequantize, when the split was its one reader
        self.counts["qdq:split"] += 1


def slice_bounds(site, shape: tuple) -> tuple | None:
    """(axis, start, stop) when ``site``'s strided_slice of a ``shape`` tensor takes one
    contiguous range of one axis (step 1), else None: read from its bound index applied to
    the element numbers (dispatch's static_slice reads the constant arguments)."""
    fn = static_slice(site) if site is not None else None
    if fn is None or not shape:
        return None
    probe = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    part = fn(probe)
    axes = [a for a, (d, p) in enumerate(zip(shape, part.shape)) if d != p]
    if len(axes) != 1 or part.ndim != len(shape) or not part.size:
        return None
    axis = axes[0]
    start = int(np.unravel_index(int(part.flat[0]), shape)[axis])
    stop = start + part.shape[axis]
    index = (slice(None),) * axis + (slice(start, stop),)
    return (axis, start, stop) if np.array_equal(part, probe[index]) else None


def _word_permute(rw: Rewriter, node: Node) -> bool:
    """A pattern (Rewriter.apply): an int8 ``permute_dims`` keeping the last axis in 4-byte
    words becomes a QPermute call."""
    if node.op != "permute_dims" or node.site is None or node.fn is not None:
        return False
    values = rw.program.values
    x = values[node.ins[0]]
    shape, dtype = shape_of(x), _dtype(x)
    axes = node.site.attr("axes")
    if shape is None or dtype not in _QDTYPES or _dtype(values[node.out]) != dtype:
        return False
    axes = tuple(range(len(shape)))[::-1] if axes is None else tuple(
        int(a) % len(shape) for a in axes)
    if not word_permutable(shape, axes):
        return False
    kernel = QPermute(axes, dtype)
    rw.replace_node(node, [Node("call", node.ins[:1], node.out, fn=kernel,
                                dps=(values[node.out].sinfo,), op=kernel.op, path="native",
                                name=node.name)])
    return True


def permute_bytes(program: Program | Rewriter) -> Counter:
    """``permute_dims`` of uint8 / int8 tensors that keep their last axis in 4-byte words
    runs as a word permutation (kernels/int8/layout.py), not the TIR byte loop."""
    found = rewriter_of(program).apply([_word_permute])
    return Counter({"qdq:permute_dims on bytes": found} if found else {})


def fold_rows(program: Program | Rewriter) -> Counter:
    """Replace ``program``'s QDQ softmax / layer norm chains by row kernels on bytes (through
    the build's rewriter when given one)."""
    return _Rows(rewriter_of(program)).run()
