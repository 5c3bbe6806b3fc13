"""MLC lesson "End to End Model Execution" with msc imports instead of TVM's.

The lesson's code as written, on a generated 784-128-10 MLP (random weights, random images:
no download): the numpy MLP, its low-level loop form with call_tir, the TVMScript module with
``linear0``/``relu0``, the extern-call module (``env.linear``/``env.relu`` in torch through
DLPack), the mixture, BindParams, ``time_evaluator`` and ``show(show_meta=True)``. Every variant
must predict the same classes.

    python examples/e2e_mlp.py
"""

import numpy as np
import torch

from msc import nd, relax  # TVM: import tvm; from tvm import relax
from msc.script import ir as I  # TVM: from tvm.script import ir as I, relax as R, tir as T
from msc.script import relax as R
from msc.script import tir as T

IMAGES = 6


def make_mlp(seed: int = 0) -> tuple[dict, np.ndarray]:
    """784-128-10 weights (the lesson's fasionmnist_mlp_params.pkl shapes) and images."""
    rng = np.random.default_rng(seed)
    params = {"w0": rng.standard_normal((128, 784), "float32") * 0.05,
              "b0": rng.standard_normal(128).astype("float32") * 0.1,
              "w1": rng.standard_normal((10, 128), "float32") * 0.1,
              "b1": rng.standard_normal(10).astype("float32") * 0.1}
    return params, rng.random((IMAGES, 1, 784), "float32") * 2 - 0.5


# ---------------------------------------------------------------------- numpy reference

def numpy_mlp(data, w0, b0, w1, b1):
    lv0 = data @ w0.T + b0
    lv1 = np.maximum(lv0, 0)
    lv2 = lv1 @ w1.T + b1
    return lv2


def lnumpy_linear0(X, W, B, Z):
    Y = np.empty((1, 128), dtype="float32")
    for i in range(1):
        for j in range(128):
            for k in range(784):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
    for i in range(1):
        for j in range(128):
            Z[i, j] = Y[i, j] + B[j]


def lnumpy_relu0(X, Y):
    for i in range(1):
        for j in range(128):
            Y[i, j] = np.maximum(X[i, j], 0)


def lnumpy_linear1(X, W, B, Z):
    Y = np.empty((1, 10), dtype="float32")
    for i in range(1):
        for j in range(10):
            for k in range(128):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
    for i in range(1):
        for j in range(10):
            Z[i, j] = Y[i, j] + B[j]


def lnumpy_call_tir(prim_func, inputs, shape, dtype):
    res = np.empty(shape, dtype=dtype)
    prim_func(*inputs, res)
    return res


def lnumpy_mlp_with_call_tir(data, w0, b0, w1, b1):
    lv0 = lnumpy_call_tir(lnumpy_linear0, (data, w0, b0), (1, 128), dtype="float32")
    lv1 = lnumpy_call_tir(lnumpy_relu0, (lv0, ), (1, 128), dtype="float32")
    out = lnumpy_call_tir(lnumpy_linear1, (lv1, w1, b1), (1, 10), dtype="float32")
    return out


# ---------------------------------------------------------------------- TVMScript module

@I.ir_module
class MyModule:
    @T.prim_func
    def relu0(x: T.handle, y: T.handle):
        n, m = T.int64(), T.int64()
        X = T.match_buffer(x, (n, m), "float32")
        Y = T.match_buffer(y, (n, m), "float32")
        for i, j in T.grid(n, m):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"),
                W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def linear1(X: T.Buffer((1, 128), "float32"),
                W: T.Buffer((10, 128), "float32"),
                B: T.Buffer((10,), "float32"),
                Z: T.Buffer((1, 10), "float32")):
        T.func_attr({"global_symbol": "linear1", "tir.noalias": True})
        Y = T.alloc_buffer((1, 10), "float32")
        for i, j, k in T.grid(1, 10, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 10):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, "m"), "float32"),
             w0: R.Tensor((128, "m"), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            lv0 = R.call_tir(MyModule.linear0, (x, w0, b0), R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_tir(MyModule.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_tir(MyModule.linear1, (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


# ---------------------------------------------------------------------- extern calls (torch)

@relax.register_func("env.linear", override=True)  # TVM: @tvm.register_func(...)
def torch_linear(x, w, b, out):
    x_torch = torch.from_dlpack(x)
    w_torch = torch.from_dlpack(w)
    b_torch = torch.from_dlpack(b)
    out_torch = torch.from_dlpack(out)
    torch.mm(x_torch, w_torch.T, out=out_torch)
    torch.add(out_torch, b_torch, out=out_torch)


@relax.register_func("env.relu", override=True)
def lnumpy_relu(x, out):
    x_torch = torch.from_dlpack(x)
    out_torch = torch.from_dlpack(out)
    torch.maximum(x_torch, torch.Tensor([0.0]), out=out_torch)


@I.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(x: R.Tensor((1, "m"), "float32"),
             w0: R.Tensor((128, "m"), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            lv0 = R.call_dps_packed("env.linear", (x, w0, b0), R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


@I.ir_module
class MyModuleMixture:
    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"),
                W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            lv0 = R.call_tir(MyModuleMixture.linear0, (x, w0, b0),
                             R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


# The automatic optimization lesson calls linear0 by name: the built module exports it.
MyModuleByName = relax.from_script(MyModuleMixture.script().replace(
    "R.call_tir(cls.linear0,", 'R.call_dps_packed("linear0",'))


# ---------------------------------------------------------------------- running every variant

def run_vm(mod, *args):
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, relax.cpu())  # TVM: tvm.cpu()
    return vm["main"](*args).numpy()


def logits(params: dict, images: np.ndarray, low_level: int = 1) -> dict:
    """The scores of every variant: name -> (images, 10) array (the low-level numpy loops,
    slow in Python, run on the first ``low_level`` images only)."""
    p = params
    order = (p["w0"], p["b0"], p["w1"], p["b1"])
    nd_params = {k: nd.array(v) for k, v in p.items()}  # TVM: tvm.nd.array(v)
    out = {"numpy": [numpy_mlp(img, *order) for img in images],
           "lnumpy_call_tir": [lnumpy_mlp_with_call_tir(img, *order)
                               for img in images[:low_level]]}
    nd_order = [nd_params[k] for k in ("w0", "b0", "w1", "b1")]
    for name, mod in (("tvmscript", MyModule), ("extern_call", MyModuleWithExternCall),
                      ("mixture", MyModuleMixture), ("call_by_name", MyModuleByName)):
        vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
        out[name] = [vm["main"](nd.array(img), *nd_order).numpy() for img in images]
    out["bind_params"] = bind_params_logits(MyModuleMixture, nd_params, images)
    return {k: np.concatenate(v) for k, v in out.items()}


def bind_params_logits(mod, nd_params: dict, images: np.ndarray) -> list:
    bound = relax.transform.BindParams("main", nd_params)(mod)
    text = bound.script(show_meta=True)  # TVM: MyModuleWithParams.show(show_meta=True)
    if 'metadata["ir.GenericConst"][0]' not in text:
        raise SystemExit("BindParams: no constants in the metadata section")
    reparsed = relax.from_script(text)   # the metadata section carries the weights
    if reparsed.script(show_meta=True) != text:
        raise SystemExit("show(show_meta=True) -> from_script -> show is not a fixed point")
    vm = relax.VirtualMachine(relax.build(reparsed, target="llvm"), relax.cpu())
    ftimer = vm.time_evaluator("main", relax.cpu(), number=20)
    print(f"MyModuleWithParams time-cost: {ftimer(nd.array(images[0])).mean * 1000:.4f} ms")
    return [vm["main"](nd.array(img)).numpy() for img in images]


def main() -> dict:
    """Class predictions of every variant; SystemExit when one differs from numpy's."""
    params, images = make_mlp()
    scores = logits(params, images)
    reference = scores["numpy"]
    preds = {}
    for name, score in scores.items():
        preds[name] = np.argmax(score, axis=1)
        print(f"{name:>16}: {preds[name].tolist()}")
        if not np.allclose(score, reference[:len(score)], rtol=1e-4, atol=1e-4) or \
                not np.array_equal(preds[name], preds["numpy"][:len(score)]):
            raise SystemExit(f"{name} differs from the numpy MLP: {preds[name].tolist()}")
    return preds


if __name__ == "__main__":
    main()
