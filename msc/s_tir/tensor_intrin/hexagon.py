"""TVM's ``tvm.s_tir.tensor_intrin.hexagon`` names, refused by ``TensorIntrin.get`` (msc
compiles for x86 only)."""

from . import declare_foreign

VRMPY_u8u8i32_INTRIN = "vrmpy_u8u8i32"
VRMPY_u8i8i32_INTRIN = "vrmpy_u8i8i32"
VDMPY_i16i16i32_INTRIN = "vdmpy_i16i16i32"

declare_foreign("Hexagon", [v for k, v in dict(globals()).items() if k.endswith("INTRIN")])
