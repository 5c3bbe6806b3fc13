"""LLVM IR of the weight-only matrix-vector kernel behind ``matmul_nbits`` (nbits.py).

Decode at batch 1 reads every weight once, so the kernel is built to stream the packed codes:
per output row and group, the codes are loaded as bytes, widened and converted to float in
registers (int4: the low and high nibbles of ``lanes`` bytes are two vectors), multiplied
with x and summed; the group's sum is scaled once. The zero point comes out exactly through the
group sums of x: ``sum_k (q_k - z) s x_k = s * sum_k q_k x_k - (s z) * sum_k x_k``, with
``-s z`` precomputed per group and ``sum_k x_k`` once per call, applied per row after the
groups, a vector of groups at a time. With AVX-512 (16 lanes) an int4 code becomes its float
in one ``vpermps`` from a 16-entry table (it reads only the low 4 bits of each lane). Each
group of a row prefetches the same group of the row ``AHEAD`` below: with weights beyond the
cache the kernel would otherwise wait on memory, one row block at a time. Four weight rows run together
so each x vector is loaded once for four rows.

Code layout (what nbits.py repacks the op's MatMulNBits bytes into): row-major, each row
``Kp = groups * group`` codes; int4 in chunks of ``2 * lanes`` codes stored as ``lanes`` bytes,
byte j = code j (low nibble) | code j + lanes (high nibble), so the two nibble vectors meet
two consecutive x vectors; int8 one byte per code. x rows are ``Kp`` floats, zero-padded.

    void entry(x, out, xsum, params, M, n0, n1)   params: int64 [codes, scales, nsz, bias, N,
                                                                   G, Gp]
    out[m, n] = sum_g scales[n,g] * sum_{k in g} q[n,k] x[m,k] + nsz[n,g] * xsum[m,g] + bias[n]
    (scales [N, G]; nsz [N, Gp] and xsum [M, Gp] zero-padded to Gp, a multiple of lanes)
"""

from __future__ import annotations

from llvmlite import ir

from ..llvm.loops import F32, I32, I64, entry_alloca, for_range

__all__ = ["ROWS", "build_nbits_module", "nbits_symbol"]

ROWS = 4  # weight rows per block
AHEAD = 16  # rows ahead whose codes a row block prefetches
I8 = ir.IntType(8)
# The int64 parameter block (nbits.py fills it once per weight): name, type
_PARAMS = (("codes", I8.as_pointer()), ("scales", F32.as_pointer()), ("sz", F32.as_pointer()),
           ("bias", F32.as_pointer()), ("N", I64), ("G", I64), ("Gp", I64))
FAST = ("fast",)


def nbits_symbol(lanes: int, bits: int, group: int) -> str:
    return f"msc_nbits_gemv_{bits}b_g{group}_{lanes}l_r{ROWS}_p{AHEAD}"


class _Gen:
    def __init__(self, b: ir.IRBuilder, lanes: int, bits: int, group: int, fma, permute=None,
                 prefetch=None):
        self.b, self.lanes, self.bits, self.group, self.fma = b, lanes, bits, group, fma
        self.permute = permute  # AVX-512 vpermps: a nibble -> its float in one step
        self.prefetch = prefetch
        self.fv = ir.VectorType(F32, lanes)
        self.iv = ir.VectorType(I32, lanes)
        self.bv = ir.VectorType(I8, lanes)
        self.chunk = lanes * (8 // bits)      # codes per chunk
        self.chunk_bytes = lanes               # bytes per chunk

    def splat(self, value: ir.Value, ty) -> ir.Value:
        b = self.b
        first = b.insert_element(ir.Constant(ty, ir.Undefined), value, I32(0))
        return b.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, self.lanes), None))

    def load_f(self, base, index) -> ir.Value:
        ptr = self.b.gep(base, [index])
        return self.b.load(self.b.bitcast(ptr, self.fv.as_pointer()), align=4)

    def codes(self, base, index) -> list[ir.Value]:
        """The float vectors of one chunk's codes (two for int4, one for int8)."""
        b = self.b
        raw = b.load(b.bitcast(b.gep(base, [index]), self.bv.as_pointer()), align=1)
        wide = b.zext(raw, self.iv)
        if self.bits == 8:
            return [b.uitofp(wide, self.fv)]
        if self.permute is not None:  # vpermps reads the low 4 bits of each index lane
            table = ir.Constant(self.fv, [float(i) for i in range(16)])
            high = b.lshr(wide, ir.Constant(self.iv, [4] * self.lanes))
            return [b.call(self.permute, [table, wide]), b.call(self.permute, [table, high])]
        low = b.and_(wide, ir.Constant(self.iv, [15] * self.lanes))
        high = b.lshr(wide, ir.Constant(self.iv, [4] * self.lanes))
        return [b.uitofp(low, self.fv), b.uitofp(high, self.fv)]

    def hsum(self, vec: ir.Value) -> ir.Value:
        b, width = self.b, self.lanes
        while width > 1:
            half = width // 2
            ty = ir.VectorType(I32, half)
            lo = b.shuffle_vector(vec, vec, ir.Constant(ty, list(range(half))))
            hi = b.shuffle_vector(vec, vec, ir.Constant(ty, list(range(half, width))))
            vec, width = b.fadd(lo, hi, flags=FAST), half
        return b.extract_element(vec, I32(0))


def _xsum(g: _Gen, x, xsum, m, groups, kp, gp) -> None:
    """xsum[m, j] = sum of x[m] over group j (rows of ``gp`` >= groups floats)."""
    b = g.b
    slot = entry_alloca(b, g.fv, "xs")
    with for_range(b, groups, name="xg") as j:
        b.store(ir.Constant(g.fv, None), slot)
        start = b.add(b.mul(m, kp), b.mul(j, I64(g.group)))
        with for_range(b, I64(g.group), step=g.lanes, name="xk") as k:
            vec = g.load_f(x, b.add(start, k))
            b.store(b.fadd(b.load(slot), vec, flags=FAST), slot)
        b.store(g.hsum(b.load(slot)), b.gep(xsum, [b.add(b.mul(m, gp), j)]))


def _correction(g: _Gen, args: dict, m, n, acc: list) -> None:
    """acc[r] += nsz[n + r] * xsum[m] over the groups (``nsz = -scale * zero``), a vector of
    groups at a time: both rows are zero-padded to ``Gp`` (a multiple of the lanes)."""
    b, gp = g.b, args["Gp"]
    xsum_row = b.mul(m, gp)
    rows = [b.mul(b.add(n, I64(r)), gp) for r in range(len(acc))]
    with for_range(b, gp, step=g.lanes, name="zg") as j:
        xs = g.load_f(args["xsum"], b.add(xsum_row, j))
        for r, row in enumerate(rows):
            nsz = g.load_f(args["sz"], b.add(row, j))
            b.store(b.call(g.fma, [nsz, xs, b.load(acc[r])]), acc[r])


def _rows(g: _Gen, args: dict, m, n, rows: int) -> None:
    """out[m, n:n+rows] from ``rows`` weight rows."""
    b = g.b
    x, codes, scales = args["x"], args["codes"], args["scales"]
    groups, kp = args["G"], args["kp"]
    row_bytes = b.udiv(b.mul(kp, I64(g.bits)), I64(8))
    acc = [entry_alloca(b, g.fv, f"acc{r}") for r in range(rows)]
    gacc = [entry_alloca(b, g.fv, f"gacc{r}") for r in range(rows)]
    for r in range(rows):
        b.store(ir.Constant(g.fv, None), acc[r])
    code_rows = [b.mul(b.add(n, I64(r)), row_bytes) for r in range(rows)]
    param_rows = [b.mul(b.add(n, I64(r)), groups) for r in range(rows)]
    x_row = b.mul(m, kp)
    with for_range(b, groups, name="g") as j:
        for r in range(rows):
            b.store(ir.Constant(g.fv, None), gacc[r])
        k0 = b.mul(j, I64(g.group))
        ahead = b.udiv(b.mul(k0, I64(g.bits)), I64(8))
        for r in range(rows):  # the same group of the row AHEAD below
            line = b.add(b.add(code_rows[r], b.mul(row_bytes, I64(AHEAD))), ahead)
            b.call(g.prefetch, [b.gep(codes, [line]), I32(0), I32(3), I32(1)])
        with for_range(b, I64(g.group), step=g.chunk, name="c") as c:
            k = b.add(k0, c)
            xv = [g.load_f(x, b.add(x_row, b.add(k, I64(i * g.lanes))))
                  for i in range(8 // g.bits)]
            byte = b.udiv(b.mul(k, I64(g.bits)), I64(8))
            for r in range(rows):
                total = b.load(gacc[r])
                for wv, xvec in zip(g.codes(codes, b.add(code_rows[r], byte)), xv):
                    total = b.call(g.fma, [wv, xvec, total])
                b.store(total, gacc[r])
        for r in range(rows):
            scale = b.load(b.gep(scales, [b.add(param_rows[r], j)]))
            b.store(b.call(g.fma, [b.load(gacc[r]), g.splat(scale, g.fv), b.load(acc[r])]),
                    acc[r])
    _correction(g, args, m, n, acc)
    for r in range(rows):
        col = b.add(n, I64(r))
        value = g.hsum(b.load(acc[r]))
        value = b.fadd(value, b.load(b.gep(args["bias"], [col])), flags=FAST)
        b.store(value, b.gep(args["out"], [b.add(b.mul(m, args["N"]), col)]))


def build_nbits_module(lanes: int, bits: int, group: int) -> ir.Module:
    """The module with the entry ``nbits_symbol(lanes, bits, group)`` (see the module doc)."""
    module = ir.Module(name=nbits_symbol(lanes, bits, group))
    fptr, i64ptr = F32.as_pointer(), I64.as_pointer()
    names = ("x", "out", "xsum", "params", "M", "n0", "n1")
    types = (fptr, fptr, fptr, i64ptr, I64, I64, I64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), nbits_symbol(lanes, bits,
                                                                                  group))
    for arg, name in zip(fn.args, names):
        arg.name = name
        if isinstance(arg.type, ir.PointerType):
            arg.add_attribute("noalias")
    fv = ir.VectorType(F32, lanes)
    fma = ir.Function(module, ir.FunctionType(fv, [fv, fv, fv]), f"llvm.fma.v{lanes}f32")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    permute = ir.Function(module, ir.FunctionType(fv, [fv, ir.VectorType(I32, lanes)]),
                          "llvm.x86.avx512.permvar.sf.512") if lanes == 16 and bits == 4 else None
    prefetch = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8.as_pointer(), I32, I32,
                                                                   I32]), "llvm.prefetch.p0")
    g = _Gen(b, lanes, bits, group, fma, permute, prefetch)
    args = dict(zip(names, fn.args))
    for i, (name, ty) in enumerate(_PARAMS):
        value = b.load(b.gep(args["params"], [I64(i)]))
        args[name] = value if ty is I64 else b.inttoptr(value, ty)
    args["kp"] = b.mul(args["G"], I64(group))
    with for_range(b, args["M"], name="m") as m:
        _xsum(g, args["x"], args["xsum"], m, args["G"], args["kp"], args["Gp"])
        n1 = args["n1"]
        blocks_end = b.sub(n1, b.srem(b.sub(n1, args["n0"]), I64(ROWS)))
        with for_range(b, blocks_end, start=args["n0"], step=ROWS, name="n") as n:
            _rows(g, args, m, n, ROWS)
        with for_range(b, n1, start=blocks_end, name="t") as n:
            _rows(g, args, m, n, 1)
    b.ret_void()
    return module
