"""Demo step: TVM 0.27 text both ways, with its weights (metadata) and symbolic annotations."""

from __future__ import annotations

import os

from .shared import banner

_TEXT = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), dtype="float32"), w: R.Tensor((3,), dtype="float32")) -> R.Tensor(("n", 3), dtype="float32"):
        n = T.int64()
        R.func_attr({"num_input": 1, "params": [metadata["ffi.Tensor"][0]]})
        gv: R.Tensor((T.max(n, 0), 3), dtype="float32") = R.add(R.multiply(x, w), metadata["ir.GenericConst"][0])
        return gv'''


def step_tvm_text(out: str) -> None:
    """TVM-printed text with metadata refs -> msc -> show_meta text TVM reads -> same weights."""
    import numpy as np

    from .. import relax

    w, bias = np.arange(3, dtype="float32"), np.full((3,), 0.5, "float32")
    mod = relax.from_script(_TEXT, metadata={"ffi.Tensor": [w], "ir.GenericConst": [bias]})
    banner("TVM 0.27 text: constants and attribute tensors numbered as TVM numbers them")
    print(mod.script())
    shown = mod.script(show_meta=True)
    path = os.path.join(out, "tvm_text_show_meta.py")
    with open(path, "w") as f:
        f.write(shown + "\n")
    again = relax.from_script(shown)
    got = again["main"].attrs["params"][0].data
    print(f"(wrote {path}: metadata = tvm.ir.load_json(...) + module, {len(shown)} chars; "
          f"read back params[0] = {got.tolist()})")
    if not np.array_equal(got, w) or again.script(show_meta=True) != shown:
        raise SystemExit("show_meta text did not give back the same module and weights")
