"""TVM's ``tvm.s_tir.tensor_intrin.cuda`` names. The WMMA ``sync`` intrinsics (a 16x16x16
half-precision matrix product accumulated in float16 or float32) are registered with their
descriptions, which target-independent analyses read (``get_tensorize_loop_mapping``,
``get_auto_tensorize_mapping_info``); their implementation is the GPU's ``tvm_mma_sync``,
which msc's CPU backend does not compile. The other CUDA intrinsics are refused by name.
"""

from ...script import tir as T
from . import TensorIntrin, declare_foreign

__all__ = ["WMMA_SYNC_16x16x16_f16f16f16_INTRIN", "WMMA_SYNC_16x16x16_f16f16f32_INTRIN"]


@T.prim_func(s_tir=True)
def wmma_sync_f16f16f16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_a")
    B = T.match_buffer(b, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_b")
    C = T.match_buffer(c, (16, 16), "float16", offset_factor=16, scope="wmma.accumulator")
    with T.sblock("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.sblock("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func(s_tir=True)
def wmma_sync_f16f16f32_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_a")
    B = T.match_buffer(b, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_b")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="wmma.accumulator")
    with T.sblock("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.sblock("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32",
                                                                             B[vk, vj])


def _sync_impl(acc_dtype: str):
    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_a")
        B = T.match_buffer(b, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_b")
        C = T.match_buffer(c, (16, 16), acc_dtype, offset_factor=16, scope="wmma.accumulator")
        with T.sblock("root"):
            T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
            T.writes(C[0:16, 0:16])
            T.evaluate(T.tvm_mma_sync(C.data, C.elem_offset // 256, A.data,
                                      A.elem_offset // 256, B.data, B.elem_offset // 256,
                                      C.data, C.elem_offset // 256, dtype="handle"))

    return impl


WMMA_SYNC_16x16x16_f16f16f16_INTRIN = "wmma_sync_16x16x16_f16f16f16"
WMMA_SYNC_16x16x16_f16f16f32_INTRIN = "wmma_sync_16x16x16_f16f16f32"
TensorIntrin.register(WMMA_SYNC_16x16x16_f16f16f16_INTRIN, wmma_sync_f16f16f16_desc,
                      _sync_impl("float16"), override=True)
TensorIntrin.register(WMMA_SYNC_16x16x16_f16f16f32_INTRIN, wmma_sync_f16f16f32_desc,
                      _sync_impl("float32"), override=True)

declare_foreign("CUDA GPU", ["wmma_load_16x16x16_f16_a", "wmma_store_16x16x16_f32_global",
                             "mma_sync_16x16x16_f16f16f32"])
