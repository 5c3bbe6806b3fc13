"""Rules for ops that used to run only through numpy: conv transposes (loop form), scatters,
pixel_shuffle and the losses nll_loss / cross_entropy_with_logits."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import acc_dtype, all_of, attrs, float_of, in_bounds, inputs, output, rule
from .te import cast, const, idx

SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _per_dim(value, nd: int) -> list[int]:
    v = [int(value)] if isinstance(value, int) else [int(x) for x in value]
    return v * nd if len(v) == 1 else v


def _wrap_negative(k: E.PrimExpr, n) -> E.PrimExpr:
    k = cast(k, "int64")
    return te.select(E.BinaryOp("LT", k, idx(0)), E.add(k, n), k)


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
        strides, dilation = _per_dim(a.get("strides", 1), nd), _per_dim(a.get("dilation", 1), nd)
        pads = _per_dim(a.get("padding", 0), nd)
        before = pads[:nd]
        groups = int(a.get("groups", 1))
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


# ---------------------------------------------------------------------------- scatters

_COMBINE = {"add": "Add", "mul": "Mul", "min": "Min", "max": "Max"}


def _scatter_stages(b, data, out, at_of, updates, reduction: str, name: str):
    """Copy ``data`` into the output, then ``out[at_of(i)] (op)= updates[i]`` in loop order."""
    if reduction != "update" and reduction not in _COMBINE:
        raise UnsupportedOpError(f"scatter reduction {reduction!r} has no legalization",
                                 op=name)
    y = b.output(out.values, out.dtype, "T_" + name)
    b.store(y, out.values, lambda *i: i, lambda *i: data[i], y.name + "_copy")

    def value(*i):
        u = cast(updates[i], out.dtype)
        if reduction == "update":
            return u
        return E.BinaryOp(_COMBINE[reduction], y[tuple(at_of(*i))], u)
    b.store(y, updates.shape, at_of, value, y.name)
    return y


@rule("scatter_elements")
def _scatter_elements(call):
    b, (data, indices, updates) = inputs(call)
    out, a = output(call), attrs(call)
    axis = int(a.get("axis", 0)) % data.ndim

    def at_of(*i):
        k = _wrap_negative(indices[tuple(i)], data.shape[axis])
        return tuple(k if d == axis else v for d, v in enumerate(i))
    y = _scatter_stages(b, data, out, at_of, updates, a.get("reduction", "update"),
                        "scatter_elements")
    return b.prim_func([y], "scatter_elements")


@rule("scatter_nd")
def _scatter_nd(call):
    """indices (Y..., M); updates (Y..., rest...); out[indices[y], rest] (op)= updates[y, rest]."""
    b, (data, indices, updates) = inputs(call)
    out, a = output(call), attrs(call)
    m = int(indices.shape[-1])
    lead = indices.ndim - 1

    def at_of(*i):
        index = [_wrap_negative(indices[(*i[:lead], idx(j))], data.shape[j]) for j in range(m)]
        return tuple(index) + tuple(i[lead:])
    y = _scatter_stages(b, data, out, at_of, updates, a.get("reduction", "update"),
                        "scatter_nd")
    return b.prim_func([y], "scatter_nd")


# ------------------------------------------------------------------------ pixel shuffle

@rule("nn.pixel_shuffle")
def _pixel_shuffle(call):
    """out[.., c, h * r + i, w * r + j] = x[.., c * r * r + i * r + j, h, w]."""
    b, (x,) = inputs(call)
    out = output(call)
    r = int(attrs(call)["upscale_factor"])

    def value(*i):
        *lead, c, h, w = i
        ch = E.add(E.add(E.mul(c, r * r), E.mul(E.floormod(h, r), r)), E.floormod(w, r))
        return x[(*lead, ch, E.floordiv(h, r), E.floordiv(w, r))]
    y = b.compute(out.values, value, "T_pixel_shuffle")
    return b.prim_func([y], "pixel_shuffle")


# ------------------------------------------------------------------------------ losses

@rule("nn.cross_entropy_with_logits")
def _cross_entropy(call):
    """-sum(x * y) / N (N = batch of a 2-d input, else 1)."""
    b, (x, y) = inputs(call)
    out = output(call)
    dt = acc_dtype(out.dtype)
    ks = [b.reduce_axis(d, f"k{j}") for j, d in enumerate(x.shape)]
    total = b.compute((), lambda: te.sum(E.BinaryOp(
        "Mul", cast(x[tuple(ks)], dt), cast(y[tuple(ks)], dt)), ks), "x_red", dtype=dt)
    n = float_of(x.shape[0], dt) if x.ndim == 2 else const(1, dt)
    z = b.compute((), lambda: cast(E.BinaryOp("Div", E.sub(const(0, dt), total[()]), n),
                                   out.dtype), "T_divide", dtype=out.dtype)
    return b.prim_func([z], "cross_entropy_with_logits")


@rule("nn.nll_loss")
def _nll_loss(call):
    b, (pred, target, *weights) = inputs(call)
    out, a = output(call), attrs(call)
    reduction = a.get("reduction", "mean")
    ignore = int(a.get("ignore_index", -100))
    dt = acc_dtype(out.dtype)
    items = (pred.shape[0], *pred.shape[2:]) if pred.ndim > 1 else ()

    def parts(*i):
        """(picked prediction, weight) at item ``i`` (weight 0 where ignored)."""
        t = cast(target[tuple(i)], "int64")
        skip = E.BinaryOp("EQ", t, idx(ignore))
        safe = te.select(skip, idx(0), t)
        p = pred[(i[0], safe, *i[1:])] if pred.ndim > 1 else pred[(safe,)]
        wv = cast(weights[0][(safe,)], dt) if weights else const(1, dt)
        return cast(p, dt), te.select(skip, const(0, dt), wv)

    def loss(*i):
        p, wv = parts(*i)
        return E.BinaryOp("Mul", E.sub(const(0, dt), p), wv)
    if reduction == "none":
        y = b.compute(out.values, lambda *i: cast(loss(*i), out.dtype), "T_nll_loss",
                      dtype=out.dtype)
        return b.prim_func([y], "nll_loss")
    ks = [b.reduce_axis(d, f"k{j}") for j, d in enumerate(items)]
    total = b.compute((), lambda: te.sum(loss(*ks), ks), "nll_loss_red", dtype=dt)
    if reduction == "sum":
        y = b.compute((), lambda: cast(total[()], out.dtype), "T_nll_loss", dtype=out.dtype)
        return b.prim_func([y], "nll_loss")
    ks2 = [b.reduce_axis(d, f"j{j}") for j, d in enumerate(items)]
    wsum = b.compute((), lambda: te.sum(parts(*ks2)[1], ks2), "nll_loss_weight", dtype=dt)
    y = b.compute((), lambda: cast(E.BinaryOp("Div", total[()], wsum[()]), out.dtype),
                  "T_nll_loss", dtype=out.dtype)
    return b.prim_func([y], "nll_loss")


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


# ------------------------------------------------------------- attention, resize2d

@rule("nn.attention", "nn.attention_bias")
def _attention(call):
    """q (B, S, H, D), k (B, T, H, D), v (B, T, H, Dv): softmax(q k^T * scale + bias) v
    (the shared rule of legalize/image.py)."""
    from .image import attention, causal_keep

    b, (q, k, v, *bias) = inputs(call)
    out, a = output(call), attrs(call)
    keep = causal_keep(a, q.shape[1], k.shape[1], "nn.attention")
    y = attention(b, q, k, v, out, "bshd", a, keep=keep, bias=bias[0] if bias else None,
                  op="nn.attention")
    return b.prim_func([y], "attention")


@rule("image.resize2d")
def _resize2d(call):
    from .image import resize

    return resize(call, 2)
