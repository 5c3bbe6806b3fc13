"""x86 tensor intrinsics (TVM's ``tvm.s_tir.tensor_intrin.x86``): int8 dot products.

``dot_16x4_vnni`` computes ``C[i] += u8(A[k]) * i8(B[i, k])`` over a 16 x 4 tile: sixteen
int32 lanes, each the dot product of four uint8 and four int8 values, which is one AVX-512
VNNI ``vpdpbusd``. The description is TVM's; the implementation calls
``msc.x86.dot_16x4_u8i8i32``, which msc's backend emits as ``llvm.x86.avx512.vpdpbusd.512`` on
a host with AVX-512 VNNI and as 64 scalar multiply-adds on one without (the same values).
``dot_16x4_avx512`` is registered for TVM's spelling and compiles the same way (exact int32
sums, without the int16 saturation of TVM's ``pmaddubsw`` version)::

    sch.transform_layout(block, "W", lambda i, j: [i // 16, j // 4, i % 16, j % 4])
    ...
    sch.tensorize(j_inner, VNNI_DOT_16x4_INTRIN)
"""

from ...script import tir as T
from . import TensorIntrin

__all__ = ["AVX512_DOT_16x4_INTRIN", "VNNI_DOT_16x4_INTRIN", "dot_product_16x4_u8i8i32_desc",
           "dot_product_16x4_u8i8i32_vnni"]


@T.prim_func(s_tir=True)
def dot_product_16x4_u8i8i32_desc(
    A: T.Buffer((4,), "uint8", offset_factor=1),
    B: T.Buffer((16, 4), "int8", offset_factor=1),
    C: T.Buffer((16,), "int32", offset_factor=1),
) -> None:
    with T.sblock("root"):
        T.reads(C[0:16], A[0:4], B[0:16, 0:4])
        T.writes(C[0:16])
        for i in T.serial(0, 16):
            for k in T.serial(0, 4):
                with T.sblock("update"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    C[vi] = C[vi] + T.cast(A[vk], "int32") * T.cast(B[vi, vk], "int32")


@T.prim_func(s_tir=True)
def dot_product_16x4_u8i8i32_vnni(
    A: T.Buffer((4,), "uint8", offset_factor=1),
    B: T.Buffer((16, 4), "int8", offset_factor=1),
    C: T.Buffer((16,), "int32", offset_factor=1),
) -> None:
    with T.sblock("root"):
        T.reads(C[0:16], A[0:4], B[0:16, 0:4])
        T.writes(C[0:16])
        T.evaluate(T.call_extern("int32", "msc.x86.dot_16x4_u8i8i32", C.data, C.elem_offset,
                                 A.data, A.elem_offset, B.data, B.elem_offset))


VNNI_DOT_16x4_INTRIN = "dot_16x4_vnni"
TensorIntrin.register(VNNI_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc,
                      dot_product_16x4_u8i8i32_vnni, override=True)

AVX512_DOT_16x4_INTRIN = "dot_16x4_avx512"
TensorIntrin.register(AVX512_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc,
                      dot_product_16x4_u8i8i32_vnni, override=True)
