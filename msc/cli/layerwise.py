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
from .runners import compare

__all__ = ["layerwise", "layerwise_torch", "text_report"]


def layerwise(path: str, arrays: dict, atol: float, rtol: float,
              threads: int | None = None) -> dict:
    """The per-node comparison of the ONNX model at ``path`` on ``arrays`` (see module doc)."""
    import onnx

    model = onnx.load(path)
    probed = _with_every_output(model)
    names = [o.name for o in probed.graph.output]
    reference = dict(zip(names, _run_onnxruntime(probed, arrays, threads)))
    got = dict(zip(names, _run_msc(probed, arrays, threads)))
    rows, first = [], None
    for node in model.graph.node:
        row = _node_row(node, got, reference, atol, rtol)
        if row is None:
            continue
        rows.append(row)
        if first is None and not row["ok"] and row["inputs_ok"]:
            first = row
    errors = {name: float(np.max(np.abs(got[name].astype(np.float64) -
                                        np.asarray(reference[name], np.float64))))
              for name in names if _comparable(got[name], reference[name])}
    return {"model": path, "reference": "onnxruntime", "atol": atol, "rtol": rtol,
            "compared": len(names),
            "ok": all(r["ok"] for r in rows), "first": first, "nodes": rows, "errors": errors}


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
    rows, first = [], None
    for node in gm.graph.nodes:
        if node.name not in got:
            continue
        row = {"node": node.name, "op": _fx_op(node), **_fx_row(node, got, reference, atol,
                                                                  rtol)}
        rows.append(row)
        if first is None and not row["ok"] and row["inputs_ok"]:
            first = row
    errors = {n: float(np.max(np.abs(got[n].astype(np.float64) - reference[n])))
              for n in got if _comparable(got[n], reference[n])}
    return {"model": type(module).__name__, "reference": "torch", "atol": atol, "rtol": rtol,
            "compared": len(got),
            "ok": all(r["ok"] for r in rows), "first": first, "nodes": rows, "errors": errors}


def _fx_values(gm, tensors: list) -> dict:
    import torch

    values: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            if isinstance(out, torch.Tensor):
                values[node.name] = out.detach().numpy().astype(out.numpy().dtype, copy=True)
            return out

    with torch.inference_mode():
        Recorder(gm).run(*tensors)
    return values


def _fx_op(node) -> str:
    if node.op == "call_module":
        return f"module {node.target}"
    return getattr(node.target, "__name__", str(node.target))


def _fx_row(node, got: dict, reference: dict, atol: float, rtol: float) -> dict:
    outputs = _rows([node.name], got, reference, atol, rtol)
    inputs = _rows([a.name for a in node.all_input_nodes], got, reference, atol, rtol)
    return {"ok": all(r["ok"] for r in outputs), "inputs_ok": all(r["ok"] for r in inputs),
            "outputs": outputs, "inputs": inputs}


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


def _run_onnxruntime(model, arrays: dict, threads: int | None) -> list:
    try:
        import onnxruntime as ort
    except ImportError:
        raise ValidationError("onnxruntime is not installed",
                              hint="pip install onnxruntime for --layerwise") from None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays.values())))


def _run_msc(model, arrays: dict, threads: int | None) -> list:
    import tempfile

    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    from .runners import flatten

    graph, weights = from_onnx(model)
    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, codegen_config={"need_test": False},
                       build_folder=folder)
    vm = relax.VirtualMachine(relax.build(mod), relax.cpu(), num_threads=threads)
    keys = [t.alias or t.name for t in graph.get_inputs()]
    outputs = flatten(vm["main"](*[arrays[k] for k in keys]))
    if len(outputs) != len(model.graph.output):  # a sequence output: positions unknown
        raise ValidationError(f"msc returned {len(outputs)} tensors for "
                              f"{len(model.graph.output)} outputs", hint="--layerwise compares "
                              "models whose outputs are tensors")
    return outputs  # in the model's output order


def _comparable(got, want) -> bool:
    return got is not None and want is not None and np.shape(got) == np.shape(want) and \
        np.asarray(want).dtype.kind in "biuf"


def _node_row(node, got: dict, reference: dict, atol: float, rtol: float) -> dict | None:
    outputs = _rows(node.output, got, reference, atol, rtol)
    if not outputs:
        return None
    inputs = _rows(node.input, got, reference, atol, rtol)
    return {"node": node.name or node.output[0], "op": node.op_type,
            "ok": all(r["ok"] for r in outputs), "inputs_ok": all(r["ok"] for r in inputs),
            "outputs": outputs, "inputs": inputs}


def _rows(names, got: dict, reference: dict, atol: float, rtol: float) -> list[dict]:
    names = [n for n in names if got.get(n) is not None and reference.get(n) is not None]
    return compare([np.asarray(got[n]) for n in names], [reference[n] for n in names], names,
                   atol, rtol)


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
