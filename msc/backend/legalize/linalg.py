"""matmul, dense, batch_matmul, outer, einsum, convolutions (1d-3d, any plain layout, groups,
dilation, padding) and conv transposes (NC* / IO* layouts) as plain reduction loops: the form
LegalizeOps prints. The compiler runs them in i-k-j order (vectorized over the output's last
axis); the fast GEMM / conv kernels of the VM are separate."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import (
    acc_dtype,
    all_of,
    attrs,
    in_bounds,
    inputs,
    output,
    rule,
)
from .te import cast, const, idx

SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _batch(t: te.Tensor, core: int, out_batch: tuple) -> tuple:
    """t's batch index (its dims before the ``core`` matrix dims) broadcast from the output's."""
    lead = len(out_batch) - (t.ndim - core)
    return tuple(idx(0) if (isinstance(d, E.IntImm) and d.value == 1) else out_batch[lead + k]
                 for k, d in enumerate(t.shape[:t.ndim - core]))


def _contract(call, b: te.Builder, a: te.Tensor, b_t: te.Tensor, a_index, b_index, k_extent,
              name: str, bias=None):
    """``out[i] = sum_k a[a_index(i, k)] * b[b_index(i, k)]`` in the output dtype (16-bit
    floats accumulate in float32); ``bias(i)`` starts the sum (the reduction's init)."""
    out = output(call)
    dt = acc_dtype(out.dtype)
    k = b.reduce_axis(k_extent, "k")

    def value(*i):
        prod = E.BinaryOp("Mul", cast(a[a_index(i, k)], dt), cast(b_t[b_index(i, k)], dt))
        init = cast(bias(i), dt) if bias is not None else te.const(0, dt)
        return te.Reduce("Add", prod, (k,), init)
    y = b.compute(out.values, value, name, dtype=dt, axis="i")
    if dt != out.dtype:
        y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
    return b.prim_func([y], name)


@rule("matmul", "msc.matmul")
def _matmul(call):
    b, (x, y) = inputs(call)
    out = output(call)
    a1, b1 = x.ndim == 1, y.ndim == 1
    nb = out.ndim - (0 if a1 else 1) - (0 if b1 else 1)

    def a_index(i, k):
        return (k,) if a1 else _batch(x, 2, i[:nb]) + (i[nb], k)

    def b_index(i, k):
        return (k,) if b1 else _batch(y, 2, i[:nb]) + (k, i[-1])
    return _contract(call, b, x, y, a_index, b_index, x.shape[-1], "matmul")


@rule("nn.dense", "msc.linear", "msc.linear_bias")
def _dense(call):
    """x @ w.T (weights [out, in]); msc.linear_bias starts each sum at the bias."""
    b, (x, w, *bias) = inputs(call)
    return _contract(call, b, x, w, lambda i, k: i[:-1] + (k,), lambda i, k: (i[-1], k),
                     x.shape[-1], "T_matmul_NT",
                     (lambda i: bias[0][(i[-1],)]) if bias else None)


@rule("msc.embedding")
def _embedding(call):
    b, (ids, weight) = inputs(call)
    out = output(call)
    n = weight.shape[0]

    def value(*i):
        k = cast(ids[i[:ids.ndim]], "int64")
        k = te.select(E.BinaryOp("LT", k, idx(0)), E.add(k, n), k)
        return weight[(k,) + i[ids.ndim:]]
    y = b.compute(out.values, value, "T_take")
    return b.prim_func([y], "embedding")


@rule("nn.batch_matmul")
def _batch_matmul(call):
    b, (x, y) = inputs(call)
    a = attrs(call)
    ta, tb = bool(a["transpose_a"]), bool(a["transpose_b"])

    def a_index(i, k):
        return _batch(x, 2, i[:-2]) + ((k, i[-2]) if ta else (i[-2], k))

    def b_index(i, k):
        return _batch(y, 2, i[:-2]) + ((i[-1], k) if tb else (k, i[-1]))
    return _contract(call, b, x, y, a_index, b_index, x.shape[-2 if ta else -1], "T_batch_matmul")


@rule("outer")
def _outer(call):
    b, (x, y) = inputs(call)
    out = output(call)
    z = b.compute(out.values, lambda i, j: E.BinaryOp("Mul", x[(i,)], y[(j,)]), "T_outer")
    return b.prim_func([z], "outer")


def _per_dim(value, nd: int) -> list[int]:
    v = [int(value)] if isinstance(value, int) else [int(x) for x in value]
    return v * nd if len(v) == 1 else v


def _conv(nd: int):
    """out[n, f, y..] = sum_{c, r..} x[n, g * C_g + c, y * s + r * d - pad] * w[f, c, r..]."""
    sp = SPATIAL[nd]

    def legalize(call):
        b, (x, w, *bias) = inputs(call)
        out, a = output(call), attrs(call)
        data = a.get("data_layout") or "NC" + sp
        kern = a.get("kernel_layout") or "OI" + sp
        res = a.get("out_layout") or data
        if not (data.isupper() and kern.isupper() and res.isupper()):
            raise UnsupportedOpError(f"conv layouts {data}/{kern} have no legalization",
                                     op=f"nn.conv{nd}d")
        strides, dilation = _per_dim(a["strides"], nd), _per_dim(a["dilation"], nd)
        pads = _per_dim(a["padding"], nd)
        pads = pads * 2 if len(pads) == nd else pads
        groups = int(a["groups"])
        cin_g = w.shape[kern.index("I")]
        cout_g = E.floordiv(out.values[res.index("C")], groups)
        rc = b.reduce_axis(cin_g, "rc")
        rs = [b.reduce_axis(w.shape[kern.index(c)], "r" + c.lower()) for c in sp]
        dt = acc_dtype(out.dtype)

        def value(*i):
            f = i[res.index("C")]
            channel = E.add(E.mul(E.floordiv(f, cout_g), cin_g), rc) if groups > 1 else rc
            xi = [None] * x.ndim
            xi[data.index("N")], xi[data.index("C")] = i[res.index("N")], channel
            conds = []
            for j, c in enumerate(sp):
                pos = E.sub(E.add(E.mul(i[res.index(c)], strides[j]), E.mul(rs[j], dilation[j])),
                            pads[j])
                xi[data.index(c)] = pos
                if pads[j] or pads[nd + j]:
                    conds.append(in_bounds(pos, x.shape[data.index(c)]))
            wi = [None] * w.ndim
            wi[kern.index("O")], wi[kern.index("I")] = f, rc
            for j, c in enumerate(sp):
                wi[kern.index(c)] = rs[j]
            xv = cast(x[tuple(xi)], dt)
            cond = all_of(conds)
            if cond is not None:
                xv = te.if_then_else(cond, xv, te.const(0, dt))
            init = cast(bias[0][(f,)], dt) if bias else te.const(0, dt)
            return te.Reduce("Add", E.BinaryOp("Mul", xv, cast(w[tuple(wi)], dt)), (rc, *rs),
                             init)
        name = f"conv{nd}d_{res.lower()}"
        y = b.compute(out.values, value, name, dtype=dt)
        if dt != out.dtype:
            y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
        return b.prim_func([y], f"conv{nd}d")
    return legalize


for _nd in (1, 2, 3):
    rule(f"nn.conv{_nd}d")(_conv(_nd))
rule("msc.conv1d_bias")(_conv(1))
rule("msc.conv2d_bias")(_conv(2))


# ------------------------------------------------------------------------ conv transposes

def _conv_transpose(nd: int):
    """out[n, f, y..] = sum_{c, r..} x[n, g * Cin_g + c, (y + pad - r * d) / s] *
    w[g * Cin_g + c, f % Cout_g, r..], where the division is exact and in range."""
    sp = SPATIAL[nd]

    def legalize(call):
        b, (x, w) = inputs(call)
        out, a = output(call), attrs(call)
        if ((a.get("data_layout") or "NC" + sp) != "NC" + sp
                or (a.get("kernel_layout") or "IO" + sp) != "IO" + sp
                or (a.get("out_layout") or "NC" + sp) != "NC" + sp):
            raise UnsupportedOpError("conv transpose layouts other than NC*/IO* have no "
                                     "legalization", op=f"nn.conv{nd}d_transpose")
        strides, dilation = _per_dim(a["strides"], nd), _per_dim(a["dilation"], nd)
        pads = _per_dim(a["padding"], nd)
        before = pads[:nd]
        groups = int(a["groups"])
        cin_g = E.floordiv(x.shape[1], groups)
        cout_g = w.shape[1]
        rc = b.reduce_axis(cin_g, "rc")
        rs = [b.reduce_axis(w.shape[2 + j], "r" + c.lower()) for j, c in enumerate(sp)]
        dt = acc_dtype(out.dtype)

        def value(n, f, *ys):
            channel = E.add(E.mul(E.floordiv(f, cout_g), cin_g), rc) if groups > 1 else rc
            xi, conds = [n, channel], []
            for j in range(nd):
                pos = E.sub(E.add(ys[j], before[j]), E.mul(rs[j], dilation[j]))
                if strides[j] > 1:
                    conds.append(E.BinaryOp("EQ", E.floormod(pos, strides[j]), idx(0)))
                    q = E.floordiv(pos, strides[j])
                else:
                    q = pos
                conds.append(in_bounds(q, x.shape[2 + j]))
                xi.append(q)
            wi = (channel, E.floormod(f, cout_g) if groups > 1 else f, *rs)
            xv = te.if_then_else(all_of(conds), cast(x[tuple(xi)], dt), const(0, dt))
            return te.sum(E.BinaryOp("Mul", xv, cast(w[wi], dt)), [rc, *rs])
        name = f"conv{nd}d_transpose_nc{sp.lower()}"
        y = b.compute(out.values, value, name, dtype=dt)
        if dt != out.dtype:
            y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
        return b.prim_func([y], f"conv{nd}d_transpose")
    return legalize


for _nd in (1, 2, 3):
    rule(f"nn.conv{_nd}d_transpose")(_conv_transpose(_nd))


# ------------------------------------------------------------------------------ einsum

@rule("einsum")
def _einsum(call):
    """Loops over the output labels, a reduction over the others (no ellipsis)."""
    b, ops = inputs(call)
    out = output(call)
    text = str(attrs(call)["subscripts"]).replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if "." in text or len(terms) != len(ops):
        raise UnsupportedOpError("einsum with an ellipsis has no legalization", op="einsum")
    if not arrow:
        rhs = "".join(sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1))
    dims: dict = {}
    for term, t in zip(terms, ops):
        for c, d in zip(term, t.shape):
            if c not in dims or (isinstance(dims[c], E.IntImm) and dims[c].value == 1):
                dims[c] = d
    summed = [c for c in dict.fromkeys(lhs) if c.isalpha() and c not in rhs]
    rvars = {c: b.reduce_axis(dims[c], "k_" + c) for c in summed}
    dt = acc_dtype(out.dtype)

    def load(t, term, env):
        return cast(t[tuple(idx(0) if (isinstance(d, E.IntImm) and d.value == 1)
                            else env[c] for c, d in zip(term, t.shape))], dt)

    def value(*i):
        env = dict(zip(rhs, i)) | rvars
        prod = None
        for term, t in zip(terms, ops):
            v = load(t, term, env)
            prod = v if prod is None else E.BinaryOp("Mul", prod, v)
        return te.sum(prod, list(rvars.values())) if rvars else prod
    y = b.compute(out.values, value, "T_einsum", dtype=dt)
    if dt != out.dtype:
        y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
    return b.prim_func([y], "einsum")



@rule("matmul_nbits")
def _matmul_nbits(call):
    """x @ W.T with W dequantized first: ``(code - zero) * scale`` per group of the packed
    weight (int4 codes two per byte, element 2j in the low nibble)."""
    b, (x, w, scales, zeros) = inputs(call)
    a = attrs(call)
    bits, block = int(a["bits"]), int(a["block_size"])
    dt = scales.dtype
    n = w.shape[0]

    def code(i, k):
        group, pos = E.floordiv(k, idx(block)), E.floormod(k, idx(block))
        if bits == 8:
            return cast(w[(i, group, pos)], "int32")
        byte = cast(w[(i, group, E.floordiv(pos, idx(2)))], "int32")
        shift = E.add(idx(1), E.BinaryOp("Mul", idx(15), E.floormod(pos, idx(2))))
        return E.floormod(E.floordiv(byte, cast(shift, "int32")), const(16, "int32"))

    def value(i, k):
        group = E.floordiv(k, idx(block))
        diff = E.BinaryOp("Sub", cast(code(i, k), dt), cast(zeros[(i, group)], dt))
        return E.BinaryOp("Mul", diff, scales[(i, group)])
    weight = b.compute((n, x.shape[-1]), value, "T_dequantize_nbits")
    return _contract(call, b, x, weight, lambda i, k: i[:-1] + (k,), lambda i, k: (i[-1], k),
                     x.shape[-1], "T_matmul_nbits")
