"""The schedule analyses TVM's tests call (``tvm.s_tir.schedule.analysis``): the loops a
tensor intrinsic's loops stand for, the index map of auto-tensorization, a suggested layout
and its inverse, and output blocks; and a tensorized dense that the mapping chose computes
numpy's values."""

import numpy as np

from msc import s_tir, te, tir
from msc.meta_schedule.testing import te_workload
from msc.s_tir.schedule.analysis import (
    get_auto_tensorize_mapping_info,
    get_tensorize_loop_mapping,
    is_output_block,
    suggest_index_map,
)
from msc.s_tir.tensor_intrin import TensorIntrin
from msc.s_tir.tensor_intrin.cuda import WMMA_SYNC_16x16x16_f16f16f32_INTRIN
from msc.s_tir.tensor_intrin.x86 import VNNI_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc
from msc.tir import IndexMap
from msc.tir.function import For, walk_stmts


def _loops(func):
    return [s for s in walk_stmts(func.body) if isinstance(s, For)]


def _dense():
    x = te.placeholder((32, 32), "uint8", name="X")
    w = te.placeholder((32, 32), "int8", name="W")
    k = te.reduce_axis((0, 32), "k")
    c = te.compute((32, 32), lambda i, j: te.sum(
        x[i, k].astype("int32") * w[j, k].astype("int32"), axis=k), name="compute")
    return te.create_prim_func([x, w, c])


def test_the_vnni_loops_stand_for_the_dense_j_and_k():
    sch = s_tir.Schedule(_dense())
    block = sch.get_sblock("compute")
    info = get_tensorize_loop_mapping(sch, block, dot_product_16x4_u8i8i32_desc)
    found = {desc.loop_var.name: sch.get(sref).loop_var.name
             for sref, desc in info.loop_map.items()}
    assert found == {"i": "i1", "k": "k"}
    # the mapping is what a schedule tiles and tensorizes; the kernel still computes numpy's
    sch.transform_layout(block, "W", lambda i, j: [i // 16, j // 4, i % 16, j % 4])
    _, j, k = sch.get_loops(block)
    _, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(ko, ji, ki)
    sch.decompose_reduction(block, ko)
    sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (32, 32), dtype="uint8")
    w = rng.integers(-128, 127, (32, 32), dtype="int8")
    packed = w.reshape(2, 16, 8, 4).transpose(0, 2, 1, 3).copy()
    out = np.zeros((32, 32), "int32")
    from msc.backend.lowering.compile import compile_prim_func

    compile_prim_func(sch.mod["main"])(x, packed, out)
    np.testing.assert_array_equal(out, x.astype("int32") @ w.astype("int32").T)


def test_padding_is_reported_per_block_iter():
    func = te.create_prim_func(te_workload.matmul(127, 256, 65, "float16", "float16"))
    sch = s_tir.Schedule(func)
    desc = TensorIntrin.get("wmma_sync_16x16x16_f16f16f16").desc
    assert get_tensorize_loop_mapping(sch, sch.get_sblock("C"), desc) is None
    info = get_tensorize_loop_mapping(sch, sch.get_sblock("C"), desc, allow_padding=True)
    assert info.block_iter_paddings == [16, 1, 16]
    assert len(info.loop_map) == len(_loops(desc))


def test_auto_tensorize_fuses_the_conv_iters_into_the_intrinsic_ones():
    func = te.create_prim_func(te_workload.conv2d_nhwc(2, 8, 8, 16, 16, 3, 1, 1,
                                                       in_dtype="float16",
                                                       out_dtype="float32"))
    sch = s_tir.Schedule(func)
    desc = TensorIntrin.get(WMMA_SYNC_16x16x16_f16f16f32_INTRIN).desc
    (mapping,) = get_auto_tensorize_mapping_info(sch, sch.get_sblock("conv2d_nhwc"),
                                                 desc).mappings
    expected = IndexMap.from_func(lambda n, h, w, c, rh, rw, rc: (
        n * 64 + h * 8 + w, c, rh * 48 + rw * 16 + rc))
    assert mapping.is_equivalent_to(expected)
    assert not mapping.is_equivalent_to(IndexMap.from_func(
        lambda n, h, w, c, rh, rw, rc: (n * 64 + h * 8 + w, c, rh * 16 + rw * 48 + rc)))


def test_suggested_layout_and_its_inverse_round_trip():
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    loops = [For(loop_var=v, min=0, extent=e, kind=tir.ForKind.SERIAL, body=tir.Evaluate(0))
             for v, e in ((i, 32), (j, 64))]
    index_map = suggest_index_map(tir.decl_buffer((8, 256)),
                                  [i // 16 * 4 + j // 16, i % 16 * 16 + j % 16], loops)
    assert index_map.is_equivalent_to(IndexMap.from_func(
        lambda x, y: [x // 4, y // 16, x % 4, y % 16]))
    inverse = index_map.inverse([8, 256])
    for x, y in ((0, 0), (7, 255), (5, 100), (3, 17)):
        moved = [tir.evaluate(e) for e in index_map.map_indices([x, y])]
        assert [tir.evaluate(e) for e in inverse.map_indices(moved)] == [x, y]


def test_is_output_block():
    sch = s_tir.Schedule(te.create_prim_func(te_workload.matmul_relu(8, 8, 8)))
    assert is_output_block(sch, sch.get_sblock("D"))
    assert not is_output_block(sch, sch.get_sblock("C"))
