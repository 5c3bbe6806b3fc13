"""TVM's ``tvm.s_tir.tensor_intrin.arm_cpu`` names. msc compiles for x86 only: the names are
known so code importing them runs, and ``TensorIntrin.get`` / ``tensorize`` refuse them."""

from . import declare_foreign

DP4A_S8S8S32_INTRIN = "dp4a_s8s8s32"
DP4A_U8S8S32_INTRIN = "dp4a_u8s8s32"
DP4A_S8U8S32_INTRIN = "dp4a_s8u8s32"
DP4A_U8U8U32_INTRIN = "dp4a_u8u8u32"
ARM_DOT_4x4_i8_NEON_INTRIN = "dot_4x4_i8i8s32_neon"
ARM_DOT_4x4_i8_SDOT_INTRIN = "dot_4x4_i8i8s32_sdot"
ARM_DOT_4x4_u8_UDOT_INTRIN = "dot_4x4_u8u8u32_udot"
ARM_DOT_4x4_u8_HDOT_INTRIN = "dot_4x4_u8u8i32_hdot"

declare_foreign("Arm (or dp4a)", [v for k, v in dict(globals()).items() if k.endswith("INTRIN")])
