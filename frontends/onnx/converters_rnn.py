"""Recurrent ONNX ops (RNN, GRU, LSTM), unrolled over a static sequence length.

The input projection of all steps is one matmul; each step adds the recurrent matmul and
applies the cell. ``sequence_lens`` masks the steps past each batch entry's length (the
state is carried, the output is zero), reverse directions run on ``reverse_sequence``d input.
"""

from __future__ import annotations

from dataclasses import dataclass

from msc import relax
from msc.tir import expr as tir

from .common import call, scalar
from .context import Context, OnnxNode
from .converters_manipulate import need_const

# ONNX activation name -> fn(g, x, alpha, beta) building the Relax expression.
ACTIVATIONS = {
    "Sigmoid": lambda g, x, a, b: call("sigmoid", x),
    "Tanh": lambda g, x, a, b: call("tanh", x),
    "Relu": lambda g, x, a, b: call("nn.relu", x),
    "Affine": lambda g, x, a, b: call("add", call("multiply", x, scalar(g, a, x)),
                                      scalar(g, b, x)),
    "LeakyRelu": lambda g, x, a, b: call("nn.leakyrelu", x, a),
    "ThresholdedRelu": lambda g, x, a, b: call(
        "where", call("greater", x, scalar(g, a, x)), x, scalar(g, 0, x)),
    "ScaledTanh": lambda g, x, a, b: call(
        "multiply", call("tanh", call("multiply", x, scalar(g, b, x))), scalar(g, a, x)),
    "HardSigmoid": lambda g, x, a, b: call(
        "clip", call("add", call("multiply", x, scalar(g, a, x)), scalar(g, b, x)), 0.0, 1.0),
    "Elu": lambda g, x, a, b: call("where", call("greater", x, scalar(g, 0, x)), x, call(
        "multiply", call("subtract", call("exp", x), scalar(g, 1, x)), scalar(g, a, x))),
    "Softsign": lambda g, x, a, b: call(
        "divide", x, call("add", call("abs", x), scalar(g, 1, x))),
    "Softplus": lambda g, x, a, b: call("log", call("add", call("exp", x), scalar(g, 1, x))),
}
# Default (alpha, beta) per activation when the node gives none.
_DEFAULT_ALPHA_BETA = {"LeakyRelu": (0.01, 0.0), "ThresholdedRelu": (1.0, 0.0),
                       "HardSigmoid": (0.2, 0.5), "Elu": (1.0, 0.0),
                       "Affine": (1.0, 0.0), "ScaledTanh": (1.0, 1.0)}
# kind -> (gates, default activations per direction)
_KINDS = {"RNN": (1, ["Tanh"]), "GRU": (3, ["Sigmoid", "Tanh"]),
          "LSTM": (4, ["Sigmoid", "Tanh", "Tanh"])}


@dataclass
class _Direction:
    """One direction's weights (already transposed) and activations."""

    w: object
    r: object
    wb: object
    rb: object
    peep: object
    acts: list


def _act(g: Context, spec, x):
    name, alpha, beta = spec
    return g.emit(ACTIVATIONS[name](g, x, alpha, beta))


def _activations(node: OnnxNode, kind: str, dirs: int) -> list:
    names = node.attrs.get("activations") or _KINDS[kind][1] * dirs
    alphas, betas = list(node.attrs.get("activation_alpha") or []), list(
        node.attrs.get("activation_beta") or [])
    specs = []
    for name in names:
        name = next((a for a in ACTIVATIONS if a.lower() == name.lower()), None)
        if name is None:
            raise node.unsupported(f"activation {name!r} is not supported")
        alpha, beta = _DEFAULT_ALPHA_BETA.get(name, (0.0, 0.0))
        if name in _DEFAULT_ALPHA_BETA:
            alpha = alphas.pop(0) if alphas else alpha
            beta = betas.pop(0) if betas and name in ("HardSigmoid", "Affine",
                                                      "ScaledTanh") else beta
        specs.append((name, alpha, beta))
    per = len(_KINDS[kind][1])
    return [specs[d * per:(d + 1) * per] for d in range(dirs)]


def _gates(g: Context, x, count: int, hidden: int) -> list:
    return [g.emit(call("strided_slice", x, [x.struct_info.ndim - 1], [k * hidden],
                        [(k + 1) * hidden])) for k in range(count)]


def _clip(g: Context, node: OnnxNode, x):
    limit = node.attrs.get("clip")
    return x if not limit else call("clip", x, -float(limit), float(limit))


# --------------------------------------------------------------------------------------------
# Cells: fn(g, node, d, xw_t, h, c, hidden) -> (h, c).

def _rnn_cell(g, node, d: _Direction, xw, h, c, hidden):
    pre = call("add", xw, call("matmul", h, d.r))
    pre = pre if d.rb is None else call("add", pre, d.rb)
    return _act(g, d.acts[0], _clip(g, node, pre)), None


def _gru_cell(g, node, d: _Direction, xw, h, c, hidden):
    xz, xr, xh = _gates(g, xw, 3, hidden)
    hr = g.emit(call("matmul", h, d.r))
    if d.rb is not None:
        hr = g.emit(call("add", hr, d.rb))
    rz, rr, rh = _gates(g, hr, 3, hidden)
    z = _act(g, d.acts[0], _clip(g, node, call("add", xz, rz)))
    r = _act(g, d.acts[0], _clip(g, node, call("add", xr, rr)))
    if node.attrs["linear_before_reset"]:
        cand = call("add", xh, call("multiply", r, rh))
    else:
        r_weights = call("strided_slice", d.r, [1], [2 * hidden], [3 * hidden])
        cand = call("add", xh, call("matmul", call("multiply", r, h), r_weights))
        if d.rb is not None:
            cand = call("add", cand, call("strided_slice", d.rb, [0], [2 * hidden],
                                          [3 * hidden]))
    hh = _act(g, d.acts[1], _clip(g, node, cand))
    one = scalar(g, 1, hh)
    new = call("add", call("multiply", call("subtract", one, z), hh), call("multiply", z, h))
    return g.emit(new), None


def _lstm_cell(g, node, d: _Direction, xw, h, c, hidden):
    pre = call("add", xw, call("matmul", h, d.r))
    pre = g.emit(pre if d.rb is None else call("add", pre, d.rb))
    pi, po, pf = _gates(g, d.peep, 3, hidden) if d.peep is not None else (None,) * 3
    xi, xo, xf, xc = _gates(g, pre, 4, hidden)
    i = _act(g, d.acts[0], _clip(g, node, _peep(xi, pi, c)))
    f = _act(g, d.acts[0], _clip(g, node, _peep(xf, pf, c)))
    if node.attrs.get("input_forget"):
        f = g.emit(call("subtract", scalar(g, 1, i), i))
    cand = _act(g, d.acts[1], _clip(g, node, xc))
    c_new = g.emit(call("add", call("multiply", f, c), call("multiply", i, cand)))
    o = _act(g, d.acts[0], _clip(g, node, _peep(xo, po, c_new)))
    return g.emit(call("multiply", o, _act(g, d.acts[2], c_new))), c_new


def _peep(x, p, c):
    return x if p is None else call("add", x, call("multiply", p, c))


_CELLS = {"RNN": _rnn_cell, "GRU": _gru_cell, "LSTM": _lstm_cell}


# --------------------------------------------------------------------------------------------
# The unrolled loop.

def recurrent(kind: str):
    def convert(g: Context, node: OnnxNode):
        x, w, r, b, lens, h0 = node.inputs[:6]
        c0, peep = (node.inputs[6:8] if kind == "LSTM" else (None, None))
        layout = node.attrs.get("layout") or 0
        if layout:
            x = g.emit(call("permute_dims", x, [1, 0, 2]))
            h0, c0 = (None if s is None else g.emit(call("permute_dims", s, [1, 0, 2]))
                      for s in (h0, c0))
        seq, batch = _static_dims(node, g, x)[:2]
        gates = _KINDS[kind][0]
        hidden = node.attrs.get("hidden_size") or _static_dims(node, g, r)[2]
        dirs = 2 if node.attrs["direction"] == "bidirectional" else 1
        acts = _activations(node, kind, dirs)
        outs = [_run(g, node, kind, x, lens, _direction(g, (w, r, b, peep), k, gates,
                                                          hidden, acts[k]),
                     [_state(g, s, k, batch, hidden, x) for s in (h0, c0)], seq, hidden,
                     _reverse(node, k)) for k in range(dirs)]
        return _outputs(g, outs, layout)

    convert.__name__ = f"convert_{kind.lower()}"
    return convert


def _static_dims(node: OnnxNode, g: Context, x) -> list:
    dims = [tir.as_int(d) for d in need_const(node, g.shape(x), "the input shape")]
    if any(d is None for d in dims):
        raise node.unsupported("recurrent ops need a static sequence length and batch")
    return dims


def _reverse(node: OnnxNode, k: int) -> bool:
    return node.attrs["direction"] == "reverse" or k == 1


def _direction(g: Context, params, k: int, gates: int, hidden: int, acts) -> _Direction:
    w, r, b, peep = params
    take = (lambda t: None if t is None else g.emit(call("take", t, relax.const(k), 0)))
    w_k, r_k, b_k = take(w), take(r), take(b)
    wt = g.emit(call("permute_dims", w_k, [1, 0]))
    rt = g.emit(call("permute_dims", r_k, [1, 0]))
    wb = rb = None
    if b_k is not None:
        size = gates * hidden
        wb = g.emit(call("strided_slice", b_k, [0], [0], [size]))
        rb = g.emit(call("strided_slice", b_k, [0], [size], [2 * size]))
    return _Direction(wt, rt, wb, rb, take(peep), acts)


def _state(g: Context, state, k: int, batch: int, hidden: int, like):
    if state is None:
        return g.emit(call("zeros", [batch, hidden], g.dtype(like)))
    return g.emit(call("take", state, relax.const(k), 0))


def _run(g: Context, node: OnnxNode, kind: str, x, lens, d: _Direction, state, seq: int,
         hidden: int, reverse: bool):
    h, c = state
    if reverse:
        x = _flip_steps(g, x, lens, seq)
    xw = g.emit(call("matmul", x, d.w))
    if d.wb is not None:
        xw = g.emit(call("add", xw, d.wb))
    ys = []
    for t in range(seq):
        xw_t = g.emit(call("take", xw, relax.const(t), 0))
        h_new, c_new = _CELLS[kind](g, node, d, xw_t, h, c, hidden)
        if lens is not None:
            live = g.emit(call("reshape", call("less", relax.const(t, g.dtype(lens)), lens),
                               [-1, 1]))
            ys.append(g.emit(call("where", live, h_new, scalar(g, 0, h_new))))
            h = g.emit(call("where", live, h_new, h))
            c = c if c_new is None else g.emit(call("where", live, c_new, c))
        else:
            ys.append(h_new)
            h, c = h_new, c_new
    y = g.emit(call("stack", ys, 0))
    if reverse:
        y = _flip_steps(g, y, lens, seq)
    return y, h, c


def _flip_steps(g: Context, x, lens, seq: int):
    if lens is None:
        return g.emit(call("flip", x, 0))
    return g.emit(call("reverse_sequence", x, lens, 0, 1))


def _outputs(g: Context, outs: list, layout: int) -> list:
    y = g.emit(call("stack", [o[0] for o in outs], 1))  # (seq, dirs, batch, hidden)
    y_h = g.emit(call("stack", [o[1] for o in outs], 0))
    y_c = g.emit(call("stack", [o[2] for o in outs], 0)) if outs[0][2] is not None else None
    if layout:
        y = g.emit(call("permute_dims", y, [2, 0, 1, 3]))
        y_h, y_c = (None if s is None else g.emit(call("permute_dims", s, [1, 0, 2]))
                    for s in (y_h, y_c))
    return [y, y_h, y_c]


CONVERTERS = {"RNN": {1: recurrent("RNN")}, "GRU": {1: recurrent("GRU")},
              "LSTM": {1: recurrent("LSTM")}}
