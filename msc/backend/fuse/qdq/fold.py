"""QDQ folding: quantize / dequantize pairs around convs and matmuls become int8 kernels.

A QDQ graph (onnxruntime's ``quantize_static`` in QDQ format, or ``compression.quantize``)
computes every int8 op in float between a ``dequantize`` and a ``quantize``::

    xq = quantize(x, sx, zx)                   # uint8 / int8, per tensor
    y  = conv2d(dequantize(xq, sx, zx), W)     # W: float weights on an int8 grid
    y  = y + b ... relu                        # per-channel epilogue (optional)
    yq = quantize(y, sy, zy)                   # optional

This pass (run by ``relax.build`` after constant folding, before fusion) replaces such a chain
by ONE native call on ``xq``: the int8 GEMM / conv of kernels/int8/conv.py with int32
accumulation, the activation zero point taken out exactly, and an epilogue that dequantizes
(``acc * sx * sw[c] + b``, relu) and, when the chain ends in a quantize, requantizes. The
dequantize stays only for other readers of its float value (dead ones are dropped).

Weights arrive as float constants (from_onnx and the constant folding evaluate
``DequantizeLinear(int8 w)``; compression.quantize stores dequantized int8 weights): a weight
folds when it lies on a symmetric int8 grid, per output channel (scale = max|w| / 127, as
both quantizers choose it) or per tensor, checked element by element; else the call stays
float. Convs: NCHW, 2-D, any groups (depthwise ones on a direct kernel); matmuls: a constant 2-D weight (``matmul``'s x2, dense /
linear ``[out, in]``). Everything else (adds, pools, attention matmuls) runs as before.

    counts = fold_qdq(program)       # {"qdq:nn.conv2d+add->quantize": 52, ...}
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np

from ....relax.expr import Call, Var
from ....relax.op.registry import attach, ops_with
from ...kernels.base import Site
from ...kernels.dense import fold_epilogue
from ...kernels.epilogues import EPILOGUE_OPS
from ...kernels.int8.bmm import QBatchMatmul
from ...kernels.int8.conv import QConv2d, QDense
from ...kernels.int8.dwconv import QDepthwise, depthwise_ok
from ...kernels.int8.eltwise import QAdd
from ...kernels.int8.pool import QAvgPool, QMaxPool
from ...kernels.pool import pad4, pair
from ...runtime.program import Node, Program
from ..rewrite import Rewriter, rewriter_of
from .lut import fold_lut
from .rows import fold_rows, permute_bytes

__all__ = ["INT8_KERNELS", "fold_qdq", "int8_grid"]

_ACT_DTYPES = ("uint8", "int8")
_GRID_TOL = 1e-3  # |q * s - w| <= tol * s for every element: w is on the grid


def int8_grid(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(q int8, scale float32 per channel of ``axis``) with q * scale == w up to rounding of
    the scale, or None when ``w`` is not a symmetric int8 tensor (per channel, else per
    tensor)."""
    if w.dtype != np.float32 or not w.size or not np.all(np.isfinite(w)):
        return None
    for per_channel in (True, False):
        if per_channel and axis is None:
            continue
        reduce = tuple(i for i in range(w.ndim) if i != axis) if per_channel else None
        absmax = np.max(np.abs(w), axis=reduce, keepdims=True)
        scale = np.where(absmax > 0, absmax / np.float32(127), np.float32(1)).astype(np.float32)
        q = np.rint(w / scale)
        if np.all(np.abs(q * scale - w) <= _GRID_TOL * scale):
            flat = np.broadcast_to(scale, [w.shape[i] if i == axis else 1
                                           for i in range(w.ndim)]) if axis is not None else scale
            return q.astype(np.int8), np.ascontiguousarray(flat.reshape(-1), np.float32)
    return None


def _pattern(nodes: list) -> str:
    """[matmul, quantize, dequantize, add, quantize] -> "matmul->quantize->dequantize+add->
    quantize": the name a folded chain is counted under."""
    text, after_quantize = "", False
    for node in nodes:
        if node.op == "quantize":
            text += "->quantize"
        else:
            text += ("->" if after_quantize else "+" if text else "") + node.op
        after_quantize = node.op == "quantize"
    return text


def _shape(sinfo) -> tuple | None:
    values = getattr(sinfo, "values", None)
    if values is None or not all(v.is_const for v in values):
        return None
    return tuple(int(v.value) for v in values)


def _scalar(value) -> float | int | None:
    """The one element of a per-tensor constant, or None (also for a NaN / infinite one)."""
    c = value.const
    if not isinstance(c, np.ndarray) or c.size != 1:
        return None
    item = c.reshape(-1)[0].item()
    return item if math.isfinite(item) else None


class _Folder:
    def __init__(self, rewriter: Rewriter):
        self.rw = rewriter
        self.program = rewriter.program
        self.values = self.program.values
        self.counts: Counter = Counter()

    def run(self, adds: bool) -> Counter:
        """GEMMs and views (``adds`` False), or the residual adds (True)."""
        # a fold may erase later nodes: the rewriter's loop skips them
        for node in self.rw.each():
            if node.kind != "call" or node.site is None:
                continue
            if adds:
                fold = self._fold_add if node.op == "add" else None
            elif node.op in _MATCH:
                fold = self._fold
            else:
                fold = {"quantize": self._fold_view}.get(node.op) or (
                    self._fold_pool if node.op in _POOLS else None)
            if fold is not None:
                fold(node)
        return self.counts

    def _dequantized_input(self, node: Node, i: int = 0):
        """(xq value id, dtype, scale, zero) when arg ``i`` is a per-tensor dequantize."""
        dq = self.rw.producer(node.ins[i]) if len(node.ins) > i else None
        if dq is None or dq.op != "dequantize" or dq.site is None or len(dq.ins) != 3:
            return None
        xq, scale, zero = (self.values[i] for i in dq.ins)
        dtype = getattr(xq.sinfo, "dtype", None)
        s, z = _scalar(scale), _scalar(zero)
        if dtype not in _ACT_DTYPES or s is None or z is None or not s > 0:
            return None
        return xq.id, dtype, float(np.float32(s)), int(z)

    def _fold(self, node: Node) -> None:
        quantized = self._dequantized_input(node)
        if quantized is not None and node.op in _BATCH_MATMULS:
            other = self._dequantized_input(node, 1)
            if other is not None:
                self._fold_batch_matmul(node, quantized, other)
                return
        site = node.site
        if quantized is not None and node.op in _CONVS:
            quantized, site = self._through_pad(quantized, site)
        made = _MATCH[node.op](site) if quantized else None
        if made is None:
            return
        w_q, w_scale, axis, bias, make = made
        self._emit(node, quantized, (quantized[0],), w_scale, axis, bias,
                   lambda *args: make(w_q, *args))

    def _through_pad(self, quantized: tuple, site: Site) -> tuple:
        """(input, site) of a conv reading ``quantize(pad(dequantize(x0)))`` with one
        quantization throughout and a zero pad of H / W only (TF-style "same" padding as an
        op of its own: HF MobileNetV2): the conv reads x0, the pad added to its own padding
        (its zero point fills the border, as the quantized zero did). Other readers of the
        padded bytes keep them; else the pad chain is dropped as dead."""
        q = self.rw.producer(quantized[0])
        pad = self.rw.producer(q.ins[0]) if (
            q is not None and q.op == "quantize" and q.site is not None and len(q.ins) == 3
        ) else None
        if pad is None or pad.op != "nn.pad" or pad.site is None:
            return quantized, site
        inner = self._dequantized_input(pad)
        s, z = (_scalar(self.values[i]) for i in q.ins[1:])
        widths = tuple(pad.site.attr("pad_width") or ())
        if (inner is None or inner[1:] != quantized[1:] or s is None or z is None
                or (float(np.float32(s)), int(z)) != quantized[2:]
                or pad.site.attr("pad_mode", "constant") != "constant"
                or float(pad.site.attr("pad_value", 0.0)) != 0.0
                or len(widths) != 8 or any(widths[:4]) or min(widths) < 0):
            return quantized, site
        top, bottom, left, right = (int(w) for w in widths[4:])
        pt, pl, pb, pr = pad4(site.attr("padding", 0))
        attrs = dict(site.attrs, padding=(pt + top, pl + left, pb + bottom, pr + right))
        self.counts["qdq:nn.pad into a conv"] += 1
        return inner, replace(site, attrs=attrs)

    def _fold_batch_matmul(self, node: Node, a: tuple, b: tuple) -> None:
        """dequantize @ dequantize (attention's QK^T, PV): int8/bmm.py, when both are
        [..., M, K] @ [..., K, N] with equal batch dims and K a multiple of 4."""
        sa, sb = (_shape(self.values[i].sinfo) for i in (a[0], b[0]))
        if (sa is None or sb is None or len(sa) != len(sb) or len(sa) < 2 or sa[:-2] != sb[:-2]
                or sa[-1] != sb[-2] or sa[-1] % 4
                or getattr(self.values[node.out].sinfo, "dtype", "") != "float32"):
            return

        def make(dtype, za, scale, bias, out, relu, post):
            return QBatchMatmul((dtype, za), (b[1], b[3]), scale, bias, out, relu, post=post)
        self._emit(node, a, (a[0], b[0]), np.float32(b[2]), -1, None, make)

    def _emit(self, node: Node, quantized: tuple, ins: tuple, w_scale, axis: int, bias,
              make) -> None:
        """The kernel of ``make`` in place of ``node`` and the epilogue / requantize chain
        after it."""
        _, dtype, sx, zx = quantized
        gone, entries, out_id = self._epilogue(node.out, axis)
        b, relu, extra = fold_epilogue(bias, entries)
        scale = (np.float64(sx) * w_scale * (1.0 if extra is None else extra)).astype(np.float32)
        requant = self._requantize(out_id)
        out, post = "f32", None
        if requant is not None:
            qnode, out = requant
            gone.append(qnode)
            out_id = qnode.out
            chained = self._chain(qnode, out, axis)
            if chained is not None:
                more, out_id, out, post = chained
                gone += more
        kernel = make(dtype, zx, scale, b, out, relu, post)
        self.counts[f"qdq:{_pattern([node, *gone])}"] += 1
        self._replace(node, Node("call", ins, out_id, fn=kernel,
                                 dps=(self.values[out_id].sinfo,), op=kernel.op,
                                 path="native", name=node.name), gone)

    def _fold_add(self, node: Node) -> None:
        """dequantize + dequantize -> add (-> relu) (-> quantize): one int8.add pass."""
        a, b = (self._dequantized_input(node, i) for i in (0, 1))
        shapes = {_shape(self.values[i].sinfo) for i in (*node.ins, node.out)}
        if a is None or b is None or len(shapes) != 1 or None in shapes or (
                getattr(self.values[node.out].sinfo, "dtype", "") != "float32"):
            return
        gone, out_id, relu = [], node.out, False
        nxt = self._single_consumer(out_id)
        if nxt is not None and nxt.op == "nn.relu":
            gone, out_id, relu = [nxt], nxt.out, True
        requant = self._requantize(out_id)
        out = "f32"
        if requant is not None:
            qnode, out = requant
            gone.append(qnode)
            out_id = qnode.out
        kernel = QAdd(a[1], b[1], (a[2], float(a[3])), (b[2], float(b[3])), out, relu)
        self.counts["qdq:add" + ("+nn.relu" if relu else "")
                    + ("->quantize" if requant else "")] += 1
        self._replace(node, Node("call", (a[0], b[0]), out_id, fn=kernel,
                                 dps=(self.values[out_id].sinfo,), op=kernel.op,
                                 path="native", name=node.name), gone)

    def _fold_pool(self, node: Node) -> None:
        """dequantize -> avg_pool2d / mean over H, W [-> quantize]: int8/pool.py."""
        x = self._dequantized_input(node)
        shape = _shape(self.values[node.ins[0]].sinfo) if node.ins else None
        pool = _POOLS[node.op](node.site.attrs or {}) if shape and len(shape) == 4 else None
        if x is None or pool is None or (
                getattr(self.values[node.out].sinfo, "dtype", "") != "float32"):
            return
        gone, out_id, out = [], node.out, "f32"
        requant = self._requantize(out_id)
        if requant is not None:
            gone, out_id, out = [requant[0]], requant[0].out, requant[1]
        kernel = QAvgPool(x[1], (x[2], x[3]), *pool, out)
        self.counts[f"qdq:{node.op}" + ("->quantize" if requant else "")] += 1
        self._replace(node, Node("call", (x[0],), out_id, fn=kernel,
                                 dps=(self.values[out_id].sinfo,), op=kernel.op,
                                 path="native", name=node.name), gone)

    def _fold_view(self, q: Node) -> None:
        """quantize(view(dequantize(xq))) with the same parameters: the view on xq itself
        (moving int8 values is exact; the two float passes go)."""
        f = self.rw.producer(q.ins[0])
        if (f is None or f.site is None or f.op not in _VIEWS or len(q.ins) != 3
                or self.rw.uses(f.out) != 1 or f.site.call is None):
            return
        x = self._dequantized_input(f)
        s, z = _scalar(self.values[q.ins[1]]), _scalar(self.values[q.ins[2]])
        q_sinfo = self.values[q.out].sinfo
        if x is None or (x[2], x[3]) != (float(np.float32(s or 0)), z) or (
                getattr(q_sinfo, "dtype", "") != x[1]):
            return
        xq = self.values[x[0]]
        if f.op == "nn.max_pool2d" and self._max_pool(f, q, x):
            return
        call = f.site.call
        new_call = Call(call.op, [Var("data", xq.sinfo), *call.args[1:]], call.attrs,
                        call.sinfo_args)
        new_call._set_struct_info(q_sinfo)
        f.site = Site(f.op, f.site.attrs, [xq, *f.site.args[1:]], q_sinfo, call=new_call)
        self.rw.absorb(f, [q])
        self.rw.set_ins(f, (x[0], *f.ins[1:]))
        self.rw.erase_dead()  # the dequantize, when f was its last reader
        self.counts[f"qdq:{f.op} on int8"] += 1

    def _max_pool(self, f: Node, q: Node, x: tuple) -> bool:
        """An NCHW max pool on the bytes: the native kernel of int8/pool.py."""
        attrs = f.site.attrs or {}
        if (attrs.get("layout", "NCHW") != "NCHW" or len(f.ins) != 1
                or pair(attrs.get("dilation", 1)) != (1, 1)
                or not QMaxPool.supports(pair(attrs["pool_size"]), pair(attrs.get("strides", 1)))):
            return False
        kernel = QMaxPool(x[1], pair(attrs["pool_size"]), pair(attrs.get("strides", 1)),
                          pad4(attrs.get("padding", 0)))
        self._replace(f, Node("call", (x[0],), q.out, fn=kernel, dps=(self.values[q.out].sinfo,),
                              op=kernel.op, path="native", name=f.name), [q])
        self.counts["qdq:nn.max_pool2d on int8"] += 1
        return True

    def _replace(self, node: Node, new: Node, gone: list) -> None:
        """``new`` in place of ``node`` and the chain ``gone`` it computes too; what they
        leave unread (a dequantize only they read) is erased."""
        self.rw.absorb(node, gone)
        self.rw.replace_node(node, [new])
        self.rw.erase_dead()

    def _single_consumer(self, vid: int):
        nxt = self.rw.only_user(vid)
        return nxt if (nxt is not None and self.rw.within(nxt) and nxt.kind == "call"
                       and nxt.site is not None) else None

    def _chain(self, q: Node, mid: tuple, axis: int):
        """After the requantize: ``dequantize`` of equal parameters (its only reader), per-
        channel affine consumers, and an optional second ``quantize``; as (nodes, out id,
        out, post) for the kernel, or None."""
        dq = self._single_consumer(q.out)
        if dq is None or dq.op != "dequantize" or len(dq.ins) != 3 or dq.ins[0] != q.out:
            return None
        s, z = _scalar(self.values[dq.ins[1]]), _scalar(self.values[dq.ins[2]])
        if s is None or (float(np.float32(s)), z) != mid[1:]:
            return None
        gone, entries, out_id = self._epilogue(dq.out, axis)
        pbias, relu2, pscale = fold_epilogue(None, entries)
        out = "f32"
        requant = self._requantize(out_id)
        if requant is None and not entries:
            return None  # the dequantized value has other readers (an int8 op among them)
        if requant is not None:
            gone.append(requant[0])
            out_id, out = requant[0].out, requant[1]
        return [dq, *gone], out_id, out, (mid[0], mid[1], mid[2], pscale, pbias, relu2)

    def _epilogue(self, start: int, axis: int):
        """Consumers that fold into the epilogue: bias / scale / relu, as the fp32 kernels'."""
        gone, entries, out_id = [], (), start
        rank = getattr(self.values[out_id].sinfo, "ndim", -1)
        while (nxt := self._single_consumer(out_id)) is not None:
            rule = EPILOGUE_OPS.get(nxt.op)
            if rule is None or any(e[0] == "relu" for e in entries):
                break
            sinfo = self.values[nxt.out].sinfo
            if getattr(sinfo, "dtype", None) != "float32" or sinfo.ndim != rank:
                break
            values = [self.values[i] for i in nxt.ins]
            more = rule(values, nxt.site.attrs or {}, out_id, axis % rank, rank)
            if not more:
                break
            entries += tuple(more)
            gone.append(nxt)
            out_id = nxt.out
        return gone, entries, out_id

    def _requantize(self, out_id: int):
        """(the quantize node, "u8" / "s8" with its scale and zero) when it alone reads
        ``out_id`` with per-tensor parameters."""
        q = self._single_consumer(out_id)
        if q is None or q.op != "quantize" or len(q.ins) != 3 or q.ins[0] != out_id:
            return None
        s, z = _scalar(self.values[q.ins[1]]), _scalar(self.values[q.ins[2]])
        kind = {"uint8": "u8", "int8": "s8"}.get(getattr(self.values[q.out].sinfo, "dtype", ""))
        if kind is None or s is None or z is None or not s > 0:
            return None
        return q, (kind, float(np.float32(s)), int(z))


# ---------------------------------------------------------------------------------------------
# What each op folds into: fn(site) -> (w_q, w_scale, channel axis, bias, make) or None.


def _conv(site, has_bias: bool = False):
    w, out = site.const(1), site.out
    layouts = (site.attr("data_layout") or "NCHW", site.attr("kernel_layout") or "OIHW",
               site.attr("out_layout") or site.attr("data_layout") or "NCHW")
    if (w is None or w.ndim != 4 or layouts != ("NCHW", "OIHW", "NCHW")
            or getattr(out, "dtype", "") != "float32"
            or site.attr("out_dtype") not in (None, "", "void", "float32")):
        return None
    bias = _const_bias(site, has_bias)
    grid = int8_grid(w, 0)
    if grid is None or bias is False:
        return None
    groups = int(site.attr("groups", 1))
    attrs = {"strides": pair(site.attr("strides", 1)), "padding": pad4(site.attr("padding", 0)),
             "dilation": pair(site.attr("dilation", 1)), "groups": groups}
    # depthwise: a direct kernel; other groups: one GEMM per group
    kind = QDepthwise if depthwise_ok(attrs, w.shape[1] * groups, groups, w.shape) else QConv2d

    def make(w_q, dtype, zx, scale, b, out, relu, post):
        return kind(w_q, attrs, dtype, zx, scale, b, out, relu, post=post)
    return grid[0], grid[1], 1, bias, make


def _dense(layout: str, has_bias: bool = False):
    def match(site):
        w, out = site.const(1), site.out
        if (w is None or w.ndim != 2 or getattr(out, "dtype", "") != "float32"
                or site.attr("out_dtype") not in (None, "", "void", "float32")):
            return None
        w_kn = w if layout == "KN" else w.T
        bias = _const_bias(site, has_bias)
        grid = int8_grid(np.ascontiguousarray(w_kn), 1)
        if grid is None or bias is False:
            return None

        def make(w_q, dtype, zx, scale, b, out, relu, post):
            return QDense(w_q, dtype, zx, scale, b, out, relu, post=post)
        return grid[0], grid[1], -1, bias, make
    return match


def _const_bias(site, has_bias: bool):
    """The call's own bias (None without one; False when it is not a usable constant)."""
    if not has_bias:
        return None
    b = site.const(2)
    ok = b is not None and b.dtype == np.float32 and b.size == b.shape[-1]
    return np.ascontiguousarray(b.reshape(-1)) if ok else False


def _avg_pool(attrs) -> tuple | None:
    """(window, strides, padding, count_include_pad) of an NCHW avg_pool2d QAvgPool runs."""
    window = pair(attrs["pool_size"])
    # small windows stay float: the scalar window loop costs ~10x the float kernel on
    # inception_v2's 3x3 pools (a vector kernel is still to write)
    if (attrs.get("layout", "NCHW") != "NCHW" or attrs.get("ceil_mode")
            or pair(attrs.get("dilation", 1)) != (1, 1) or window[0] * window[1] < 49):
        return None
    return (pair(attrs["pool_size"]), pair(attrs.get("strides", 1)),
            pad4(attrs.get("padding", 0)), bool(attrs.get("count_include_pad")))


def _global_mean(attrs) -> tuple | None:
    axes = attrs.get("axis")
    ok = axes is not None and sorted(int(a) % 4 for a in axes) == [2, 3]
    return (None, None, None, False) if ok else None


_POOLS = {"nn.avg_pool2d": _avg_pool, "mean": _global_mean}

# data movement that commutes with a per-tensor (de)quantization of equal parameters, and
# max pooling (the max of dequantized bytes is the dequantized max byte: the map is monotone)
_VIEWS = ops_with("movement") | {"nn.max_pool2d"}

_BATCH_MATMULS = ("matmul", "msc.matmul")  # may read two activations
_CONVS = ("nn.conv2d", "msc.conv2d_bias")  # may absorb a zero pad before them

# The op fact "int8": the kernels a QDQ chain around the op folds into, computing it on the
# quantized values (compression.quantize quantizes these by default: ops_having("int8")).
INT8_KERNELS = {
    "nn.conv2d": (QConv2d, QDepthwise), "msc.conv2d_bias": (QConv2d, QDepthwise),
    "matmul": (QDense, QBatchMatmul), "msc.matmul": (QDense, QBatchMatmul),
    "nn.dense": (QDense,), "msc.linear": (QDense,), "msc.linear_bias": (QDense,),
    "nn.avg_pool2d": (QAvgPool,), "mean": (QAvgPool,),  # the global mean over H, W only
    "nn.max_pool2d": (QMaxPool,), "add": (QAdd,),
}
for _op, _kernels in INT8_KERNELS.items():
    attach(_op, "int8", _kernels)

_MATCH = {
    "nn.conv2d": _conv,
    "msc.conv2d_bias": lambda site: _conv(site, has_bias=True),
    "matmul": _dense("KN"),
    "msc.matmul": _dense("KN"),
    "nn.dense": _dense("NK"),
    "msc.linear": _dense("NK"),
    "msc.linear_bias": _dense("NK", has_bias=True),
}


def fold_qdq(program: Program | Rewriter) -> Counter:
    """Replace the QDQ conv / matmul chains of ``program``'s top level by int8 kernel calls
    (through the build's rewriter when given one); returns how many of each pattern were
    folded."""
    rw = rewriter_of(program)
    # GEMMs take their epilogue chains first; then table lookups take whole elementwise
    # regions of one tensor (GPT-2's GELU, with its x + c x^3 add); then the residual adds
    counts = _Folder(rw).run(adds=False)
    counts.update(fold_rows(rw))  # softmax / layer norm rows on bytes (fuse/qdq/rows.py)
    counts.update(fold_lut(rw))
    counts.update(_Folder(rw).run(adds=True))
    counts.update(permute_bytes(rw))  # head transposes as 32-bit word copies
    return counts
