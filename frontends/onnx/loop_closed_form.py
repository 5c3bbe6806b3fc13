"""A Loop with a trip count known only at run time whose body only adds loop-invariant steps
to its carried values (``s += d``; the form ONNX's expanded Range has): written in closed form,
``s_i = s_0 + i * d``, so the scan outputs are an ``arange`` of a length bound at run time.

The values are those of ``Range``'s definition (``start + i * delta``); a body adding in
floating point step by step may differ from them in the last bits."""

from __future__ import annotations

from msc import relax

from .common import call
from .context import Context, OnnxNode


def _resolve(name: str, producers: dict) -> tuple:
    """Follow Identity nodes; (op_type, inputs) of what finally makes ``name``, or
    ("input", name) for a value the body does not produce."""
    while name in producers and producers[name].op_type == "Identity":
        name = producers[name].input[0]
    if name not in producers:
        return "input", name
    node = producers[name]
    return node.op_type, list(node.input)


def _step_of(out: str, state: str, producers: dict, inner: set):
    """The outer name ``d`` when ``out`` is ``state + d``, ``None`` when ``out`` is ``state``,
    else False (not this closed form)."""
    kind, args = _resolve(out, producers)
    if kind == "input":
        return None if args == state else False
    if kind != "Add" or len(args) != 2:
        return False
    resolved = [_resolve(a, producers) for a in args]
    for k in (0, 1):
        other = args[1 - k]
        if resolved[k] == ("input", state) and resolved[1 - k][0] == "input" and \
                other not in inner:
            return resolved[1 - k][1]
    return False


def closed_form_loop(g: Context, node: OnnxNode):
    """The Loop's outputs in closed form, or None when its body is not of this form."""
    body = node.attrs["body"]
    producers = {o: n for n in body.node for o in n.output}
    names_in = [v.name for v in body.input]
    names_out = [v.name for v in body.output]
    carried = len(node.inputs) - 2
    inner = set(producers) | set(names_in)
    if node.inputs[1] is not None and _resolve(names_out[0], producers) != ("input", names_in[1]):
        return None
    steps = [_step_of(o, s, producers, inner)
             for o, s in zip(names_out[1:1 + carried], names_in[2:])]
    if any(s is False for s in steps):
        return None
    scans = [_scan_source(o, names_in[2:], names_out[1:1 + carried], producers)
             for o in names_out[1 + carried:]]
    if any(s is None or steps[s[0]] is None for s in scans):
        return None
    env = {s: g.lookup(s) for s in steps if s is not None and g.lookup is not None}
    if any(s is not None and env.get(s) is None for s in steps):
        return None
    count = _count(g, node)
    if count is None:
        return None
    n_tensor, n = count
    finals, outs = [], []
    for j, step in enumerate(steps):
        s0 = node.inputs[2 + j]
        if step is None:
            finals.append(s0)
            continue
        times = g.emit(call("astype", n_tensor, g.dtype(s0)))
        finals.append(g.emit(call("add", s0, call("multiply", times, env[step]))))
    for j, after in scans:
        s0, d = node.inputs[2 + j], env[steps[j]]
        index = call("arange", 1 if after else 0, n + 1 if after else n, 1, "int64")
        index = call("reshape", call("astype", index, g.dtype(s0)), [n] + [1] * g.ndim(s0))
        outs.append(g.emit(call("add", call("multiply", index, d), s0)))
    return finals + outs


def _scan_source(out: str, states_in: list, states_out: list, producers: dict):
    """(state index, after the step?) of a scan output that is a carried value."""
    resolved = _resolve(out, producers)
    for j, (s_in, s_out) in enumerate(zip(states_in, states_out)):
        if resolved == ("input", s_in):
            return j, False
        if resolved == _resolve(s_out, producers):
            return j, True
    return None


def _count(g: Context, node: OnnxNode):
    """(int64 scalar tensor, bound symbolic value) of the number of steps: the trip count, or
    0 when the (unchanging) condition is false."""
    trip, cond = node.inputs[0], node.inputs[1]
    count = call("reshape", trip, [])
    if cond is not None:
        count = call("multiply", count, call("astype", call("reshape", cond, []), "int64"))
    count = g.emit(call("maximum", count, relax.const(0, "int64")))
    values = g.runtime_ints(count, "trip")
    return None if values is None else (count, values[0])
