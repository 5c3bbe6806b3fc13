"""Tensor op families (manipulate, create, reduce, index, linalg, special, quant): the
op-table level tests; ``test_op_<family>.py`` hold the per-op cases (harness:
tests/helpers/op_cases.py).
"""

from __future__ import annotations

import inspect

import pytest

from msc import relax
from msc.relax.op import OPS
from msc.relax.op.defs_manipulate import OP_ALIASES, TRILU
from tests.helpers.op_cases import tvm_modules


def test_aliases_point_at_registered_ops():
    for alias, name in {**OP_ALIASES, **{f"trilu({k})": v for k, v in TRILU.items()}}.items():
        assert name in OPS, alias
        assert alias not in OPS, f"{alias} is an alias, not a second record"


TENSOR_FAMILIES = ("manipulate", "shape", "create", "reduce", "scan", "sort", "search", "index",
                   "linalg", "special", "quant")


# Ops of these families that TVM 0.27 does not have, with the reason msc has them.
MSC_EXTENSIONS = {"reinterpret": "ONNX BitCast; TVM's nearest, R.memory.view, also moves shape "
                                 "and byte offset",
                  "det": "ONNX Det; TVM 0.27's relax has no determinant",
                  "index_copy": "torch's index_copy: the KV cache append of a decode step, "
                                "which the VM writes in place (backend/fuse/patterns/cache.py)",
                  "vision.non_max_suppression": "ONNX NonMaxSuppression (as many rows as kept "
                                                "boxes); TVM's all_class_ variant pads them",
                  "matmul_nbits": "onnxruntime's MatMulNBits: weight-only int4 / int8 "
                                  "(compression/weight_only); MLC-LLM keeps its own passes"}


def _tensor_ops() -> list:
    return sorted(name for name, d in OPS.items() if d.family in TENSOR_FAMILIES)


def test_extensions_are_tensor_ops_tvm_lacks():
    _, tvm_relax = tvm_modules()
    for name in MSC_EXTENSIONS:
        assert name in _tensor_ops() and not hasattr(tvm_relax.op, name), name


@pytest.mark.parametrize("name", sorted(set(_tensor_ops()) - set(MSC_EXTENSIONS)))
def test_signature_matches_tvm(name):
    """Python parameter names, order and simple defaults are TVM's (extra trailing keywords,
    like call_tir's older ``out_sinfo``, are allowed)."""
    _, tvm_relax = tvm_modules()
    theirs = inspect.signature(getattr(tvm_relax.op, name)).parameters
    ours = inspect.signature(getattr(relax.op, name)).parameters
    assert list(ours)[:len(theirs)] == list(theirs)
    for key, param in theirs.items():
        if isinstance(param.default, (int, float, str, bool, type(None))):
            assert ours[key].default == param.default, key


def test_every_tvm_tensor_op_is_registered_or_listed():
    """TVM 0.27's top-level ops are all in the table, except these known gaps."""
    tvm, _ = tvm_modules()
    known_gaps = {
        "hint_on_device", "to_vdevice",  # need VDevice objects msc does not model
        "call_tir_with_grad", "call_py_func", "invoke_closure", "invoke_pure_closure",
        "make_closure", "wrap_param", "multinomial_from_uniform",
        "atan2", "ewise_fma",  # elementwise: defs_elementwise's family, not this one
    }
    names = {n[len("relax."):] for n in tvm.ir.Op.list_op_names()
             if n.startswith("relax.") and n.count(".") == 1}
    missing = sorted(names - set(OPS) - known_gaps)
    assert missing == [], missing
