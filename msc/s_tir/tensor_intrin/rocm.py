"""TVM's ``tvm.s_tir.tensor_intrin.rocm`` names, refused by ``TensorIntrin.get`` (msc has no
GPU target)."""

from . import declare_foreign

AMDGPU_SDOT4_INTRIN = "sdot4"

declare_foreign("ROCm GPU", [v for k, v in dict(globals()).items() if k.endswith("INTRIN")])
