"""Where msc and onnxruntime first disagree, node by node (``msc run --check --layerwise``).

Polygraphy's layer-wise compare, through the user's path: every intermediate tensor of the
ONNX graph (top level, with a type that shape inference knows) becomes a graph output of a
copy of the model. onnxruntime runs the copy; msc imports the same copy (from_onnx ->
MSCGraph -> to_relax -> build -> VM) and returns the same tensors. Each node's outputs are
compared with the run's tolerances in graph order. The *first divergence* is the first node
whose outputs differ while every compared input agrees: the converter or kernel to look at.

    report = layerwise("model.onnx", {"x": x}, atol=1e-4, rtol=1e-4)
    report["first"]          # {"node": "/layer1/conv", "op": "Conv", ...} or None
    report["errors"]         # {onnx tensor name: max abs error}
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from .runners import LITERAL, QDQ_OPS, compare, msc_runner, onnxruntime_runner

__all__ = ["error_overlay", "layerwise", "layerwise_torch", "text_report"]


def layerwise(path: str, arrays: dict, atol: float, rtol: float,
              threads: int | None = None) -> dict:
    """The per-node comparison of the ONNX model at ``path`` on ``arrays`` (see module doc)."""
    import onnx

    model = onnx.load(path)
    probed = _with_every_output(model)
    names = [o.name for o in probed.graph.output]
    # a QDQ model is compared with its nodes as written (runners.LITERAL)
    qdq = any(node.op_type in QDQ_OPS for node in model.graph.node)
    reference = dict(zip(names, onnxruntime_runner(probed.SerializeToString(), threads,
                                                   path, literal=qdq)(arrays)))
    got = dict(zip(names, _run_msc(probed, path, arrays, threads)))
    nodes = [(node.name or node.output[0], node.op_type, node.output, node.input)
             for node in model.graph.node]
    return _report(path, LITERAL if qdq else "onnxruntime", nodes, got, reference, atol,
                   rtol)


def layerwise_torch(module, arrays: dict, atol: float, rtol: float,
                    threads: int | None = None) -> dict:
    """The per-node comparison of a torch module: torch.fx traces it, torch.fx's Interpreter
    records every node's value, and msc's torch frontend converts the same trace with every
    node's value as an output (the Relax of from_torch, compiled by msc's backend).

    A model torch.fx cannot trace is refused (from_torch then uses torch.export, whose nodes
    this compares not yet).
    """
    import torch

    from msc import relax
    from msc.errors import UnsupportedOpError
    from msc.frontends.torch.common import input_vars, is_tensor
    from msc.frontends.torch.fx import FxTranslator, trace_fx

    from .runners import flatten

    try:
        gm = trace_fx(module)
    except Exception as err:  # noqa: BLE001 - any trace failure is this refusal
        raise UnsupportedOpError(f"--layerwise traces torch models with torch.fx, which "
                                 f"cannot trace {type(module).__name__}: {err}",
                                 hint="export the model to ONNX and run --layerwise on it") \
            from None
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays.values()]
    reference = _fx_values(gm, tensors)
    translator, names = FxTranslator(gm), []

    def every_value(_):
        values = []
        for node, value in translator.env.items():
            if node.op != "placeholder" and is_tensor(value) and node.name in reference:
                names.append(node.name)
                values.append(value)
        return relax.Tuple(values)

    info = [(list(t.shape), str(t.dtype).removeprefix("torch.")) for t in tensors]
    mod = translator.translate(gm.graph, input_vars(info), every_value)  # weights: constants
    vm = relax.VirtualMachine(relax.build(mod), relax.cpu(), num_threads=threads)
    got = dict(zip(names, flatten(vm["main"](*[t.numpy() for t in tensors]))))
    nodes = [(node.name, _fx_op(node), [node.name], [a.name for a in node.all_input_nodes])
             for node in gm.graph.nodes if node.name in got]
    return _report(type(module).__name__, "torch", nodes, got, reference, atol, rtol)


def _report(model: str, who: str, nodes: list, got: dict, reference: dict, atol: float,
            rtol: float) -> dict:
    """``nodes``: ``(name, op, output names, input names)`` in graph order. Each node with a
    compared output is a row; the first whose outputs differ while its inputs agree is the
    first divergence."""
    rows = []
    for name, op, outputs, inputs in nodes:
        outs = _rows(outputs, got, reference, atol, rtol)
        if outs:
            ins = _rows(inputs, got, reference, atol, rtol)
            rows.append({"node": name, "op": op, "ok": all(r["ok"] for r in outs),
                         "inputs_ok": all(r["ok"] for r in ins), "outputs": outs,
                         "inputs": ins})
    first = next((r for r in rows if not r["ok"] and r["inputs_ok"]), None)
    errors = {n: float(np.max(np.abs(np.asarray(got[n], np.float64) -
                                     np.asarray(reference[n], np.float64))))
              for n in got if _comparable(got[n], reference.get(n))}
    return {"model": model, "reference": who, "atol": atol, "rtol": rtol,
            "compared": len(got), "ok": all(r["ok"] for r in rows), "first": first,
            "nodes": rows, "errors": errors}


def _fx_values(gm, tensors: list) -> dict:
    import torch

    values: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            if isinstance(out, torch.Tensor):
                values[node.name] = out.detach().numpy().copy()
            return out

    with torch.inference_mode():
        Recorder(gm).run(*tensors)
    return values


def _fx_op(node) -> str:
    if node.op == "call_module":
        return f"module {node.target}"
    return getattr(node.target, "__name__", str(node.target))


def _with_every_output(model):
    """A copy of ``model`` whose graph outputs are also every typed intermediate tensor."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v for v in inferred.graph.value_info}
    copy = type(model)()
    copy.CopyFrom(model)
    present = {o.name for o in copy.graph.output}
    for node in copy.graph.node:
        for name in node.output:
            info = types.get(name)
            if name and name not in present and info is not None and \
                    info.type.WhichOneof("value") == "tensor_type":
                copy.graph.output.append(info)
                present.add(name)
    return copy


def _run_msc(model, path: str, arrays: dict, threads: int | None) -> list:
    """The probed model through the user's path (``msc run``'s runner)."""
    from msc.frontends.translate import from_onnx

    from .loaders import Model

    graph, weights = from_onnx(model)
    run, _ = msc_runner(Model(path, path, "onnx", graph, weights), threads)
    outputs = run(arrays)
    if len(outputs) != len(model.graph.output):  # a sequence output: positions unknown
        raise ValidationError(f"msc returned {len(outputs)} tensors for "
                              f"{len(model.graph.output)} outputs", hint="--layerwise compares "
                              "models whose outputs are tensors")
    return outputs  # in the model's output order


def _comparable(got, want) -> bool:
    return got is not None and want is not None and np.shape(got) == np.shape(want) and \
        np.asarray(want).dtype.kind in "biuf"


def _rows(names, got: dict, reference: dict, atol: float, rtol: float) -> list[dict]:
    names = [n for n in names if got.get(n) is not None and reference.get(n) is not None]
    return compare([np.asarray(got[n]) for n in names], [reference[n] for n in names], names,
                   atol, rtol)


def error_overlay(report: dict, graph):
    """The report as an overlay of ``graph`` (the graph ``msc view`` shows of the same model):
    each joint's largest output error among the source nodes it was built from, on a log
    scale, collapsed groups showing their worst joint, and the first divergence as the focus.
    Nodes that became no joint (a folded view, a constant) are left out."""
    from ..viewer.overlay import Overlay

    values: dict[str, float] = {}
    for row in report["nodes"]:
        joint = graph.sources.get(row["node"])
        errs = [r["max_abs"] for r in row["outputs"] if "max_abs" in r]
        if joint is not None and errs:
            values[joint] = max(values.get(joint, 0.0), *errs)
    first = report["first"]
    focus = graph.sources.get(first["node"]) if first else None
    scale = "log" if any(v > 0 for v in values.values()) else "linear"
    return Overlay(f"max abs error vs {report['reference']}", values, scale, "max", focus)


def text_report(report: dict) -> str:
    """The first divergence (its inputs' errors and its own), then a count."""
    lines = [(f"layerwise: {len(report['nodes'])} nodes compared with {report['reference']} "
              f"(atol {report['atol']:g}, rtol {report['rtol']:g})")]
    first = report["first"]
    if first is None:
        bad = sum(not r["ok"] for r in report["nodes"])
        lines.append("every node agrees" if not bad else
                     f"{bad} nodes differ, each after an input that already differed")
        return "\n".join(lines)
    lines.append(f"first divergence: node {first['node']!r} ({first['op']})")
    for label, rows in (("input", first["inputs"]), ("output", first["outputs"])):
        for row in rows:
            lines.append(f"  {label} {row['output']}: " + (
                row["error"] if "error" in row else
                f"max abs err {row['max_abs']:.3g}, max rel err {row['max_rel']:.3g}"))
    later = sum(not r["ok"] for r in report["nodes"]) - 1
    lines.append(f"{later} later nodes differ too")
    return "\n".join(lines)
