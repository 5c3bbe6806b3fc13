"""``msc demo``: a short end-to-end tour that grows with every capability msc gains."""

from __future__ import annotations

import json
import os
from importlib import resources

from .shared import banner, tiny_cnn_onnx


def step_graph_from_json(out: str) -> None:
    """An MSCGraph from the packaged conv-relu JSON: printed form, inspect(), prototxt."""
    from ..graph import MSCGraph

    text = resources.files("msc").joinpath("data/conv_relu.json").read_text()
    graph = MSCGraph.from_json(text)
    graph.check()
    banner("MSCGraph from JSON (msc/data/conv_relu.json)")
    print(graph)
    banner("graph.inspect()")
    print(json.dumps(graph.inspect()))
    banner("graph.visualize() -> prototxt (open it in Netron)")
    path = os.path.join(out, "conv_relu.prototxt")
    print(graph.visualize(path))
    graph.to_json(os.path.join(out, "conv_relu.json"))
    print(f"(wrote {path} and conv_relu.json)")


def step_relax_builder(out: str) -> None:
    """A Relax module built with the BlockBuilder, with shapes inferred on emit."""
    from .. import relax, tir

    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 784), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((784,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            lv = bb.emit(relax.op.add(x, y))
            gv = bb.emit_output(relax.op.sigmoid(lv))
        bb.emit_func_output(gv)
    mod = bb.get()
    banner("Relax BlockBuilder: dynamic batch n, struct info inferred on emit")
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            sinfo = b.var.struct_info
            dims = ", ".join(str(d) for d in sinfo.values)
            print(f"{b.var.name_hint}: ({dims}) {sinfo.dtype} = {b.value.op.name}")


def step_op_table(out: str) -> None:
    """The op table answers what is true of an op: traits on the record, facts loaded by kind."""
    from ..relax.op import OPS, load_facts, ops_with

    banner("The op table: one record per op, traits and facts every consumer reads")
    load_facts("numpy")
    load_facts("torch")
    conv = OPS["nn.conv2d"]
    print(f"{len(OPS)} ops; nn.conv2d: family {conv.family}, "
          f"{len(conv.attrs)} attrs, facts {sorted(conv.facts)}")
    print("views:", sorted(ops_with("view")))
    print("runtime ops (run by the VM):", sorted(ops_with("runtime")))


def step_hostile_input(out: str) -> None:
    """Bad input ends in a typed msc error that names the input, never a crash."""
    from msc.frontends import translate

    from .. import errors, relax
    from ..graph import MSCGraph

    banner("Hostile input: typed errors that name the input, nothing executed")
    cases = {"corrupt ONNX bytes": lambda: translate.from_onnx(b"\x08\x07 not onnx"),
             "@__import__ decorator": lambda: relax.from_script(
                 '@__import__("os").system\ndef f(): pass'),
             "JSON nested 100,000 deep": lambda: MSCGraph.from_json("[" * 100000)}
    for what, load in cases.items():
        try:
            load()
        except errors.MSCError as e:
            print(f"{what}: {type(e).__name__}: {str(e).splitlines()[0][:90]}")
        else:
            raise SystemExit(f"demo: {what} was accepted")


def step_tvmscript(out: str) -> None:
    """Print the MLP as TVMScript, parse it back (ast only), fold a bound weight."""
    import numpy as np

    from .. import relax, tir

    x = relax.Var("x", relax.TensorStructInfo((tir.Var("n", "int64"), 784), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((784, 128), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(relax.op.matmul(x, w))
            gv = bb.emit_output(relax.op.nn.relu(lv))
        bb.emit_func_output(gv)
    text = bb.get().script()
    banner("TVMScript (mod.script()), parsed back with relax.from_script")
    print(text)
    assert relax.from_script(text).script() == text
    params = {"w": np.ones((784, 128), "float32")}
    bound = relax.transform.BindParams("main", params)(relax.from_script(text))
    path = os.path.join(out, "mlp.py")
    with open(path, "w") as f:
        f.write(bound.script(show_meta=True))
    print(f"(BindParams turned w into a constant; wrote {path} with its metadata section)")


def step_onnx_to_vm(out: str) -> None:
    """ONNX -> MSCGraph (fused msc.* ops, layouts, prims) and ONNX -> Relax -> native run."""
    import numpy as np

    from msc.frontends import translate

    from .. import relax

    model = tiny_cnn_onnx()
    graph, weights = translate.from_onnx(model)
    banner("ONNX -> MSCGraph (translate.from_onnx)")
    print(graph)
    print(json.dumps(graph.inspect()))
    print("weights:", {name: list(w.shape) for name, w in weights.items()})
    mod, _ = translate.from_onnx(model, as_msc=False)
    ex = relax.build(mod)
    vm = relax.VirtualMachine(ex, relax.cpu())
    x = np.random.default_rng(1).random((2, 3, 16, 16), dtype="float32")
    got = vm["main"](x).numpy()
    banner("relax.build + VirtualMachine (llvmlite), batch 2")
    print(f"output {got.shape}, kernels {ex.stats['kernels']}")
    two = relax.VirtualMachine(ex, relax.cpu(), num_threads=2)["main"](x).numpy()
    print(f"num_threads=2: {'bitwise equal' if np.array_equal(two, got) else 'DIFFERENT'}")
    if not np.array_equal(two, got):
        raise SystemExit("demo: 2 threads changed the result")
    _compare_with_onnxruntime(model, x, got)


def _compare_with_onnxruntime(model, x, got) -> None:
    try:
        import onnxruntime as ort
    except ImportError:
        print("(onnxruntime not installed: skipped the comparison)")
        return
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    err = float(abs(got - ref).max())
    print(f"max abs difference vs onnxruntime: {err:.2e}")
    if err > 1e-4:
        raise SystemExit("demo: msc and onnxruntime disagree")


def step_torch_codegen(out: str) -> None:
    """torch -> MSCGraph -> to_torch and to_relax: same numbers, standalone scripts."""
    import subprocess
    import sys

    import numpy as np
    import torch

    from msc.codegen import save_baseline, to_relax, to_torch
    from msc.frontends import translate

    from .. import relax

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()
    graph, weights = translate.from_torch(model, [(["bz", 3, 16, 16], "float32")])
    banner("torch -> MSCGraph (translate.from_torch), weight aliases = state_dict keys")
    print(json.dumps(graph.inspect()["nodes"]))
    print([w.alias for w in graph.get_weights()])
    x = torch.rand(2, 3, 16, 16)
    expected = model(x).detach().numpy()
    torch_dir, relax_dir = os.path.join(out, "torch_net"), os.path.join(out, "relax_net")
    got_torch = to_torch(graph, weights, build_folder=torch_dir)(x).detach().numpy()
    vm = relax.VirtualMachine(relax.build(to_relax(graph, weights, build_folder=relax_dir)))
    got_relax = vm["main"](x.numpy()).numpy()
    banner("codegen: to_torch (eager) and to_relax (msc backend) vs the original model")
    for name, got in (("to_torch", got_torch), ("to_relax", got_relax)):
        print(f"{name}: max abs difference {float(np.abs(got - expected).max()):.2e}")
    save_baseline(relax_dir, {"inp_0": x.numpy()}, [expected])
    proc = subprocess.run([sys.executable, "main.py"], cwd=relax_dir, capture_output=True,
                          text=True, check=False)
    print(f"python {relax_dir}/main.py -> {proc.stdout.strip().splitlines()[-1]}")
    if proc.returncode != 0:
        raise SystemExit("demo: the generated standalone test failed")
