"""from_torch -> MSCGraph: the ``inspect()`` dicts MSC users know (names, optypes, layouts,
prims), static and with named dynamic dims, and weight aliases equal to state_dict keys.

Where TVM's importer was wrong, msc follows torch: ``x[0, ...]`` drops the indexed axis and
``x.squeeze()`` with a dynamic batch keeps its rank; ``torch.stack`` is TVM 0.27's ``stack``.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from msc.frontends.torch.api import from_torch
from tests.helpers.torch_cases import Fn, Fn2, Fn3, LossOf


class Fn4(Fn):
    def forward(self, x, y, z, w):
        return self.fn(x, y, z, w)


def fn(f, n=1):
    cls = {1: Fn, 2: Fn2, 3: Fn3, 4: Fn4}[n]
    return lambda: cls(f)


def one(make):
    """A model holding one submodule called as ``self.m(x)``."""
    return lambda: nn.Sequential(make())


def io(name, shape, dtype="float32", layout=""):
    return {"name": name, "shape": list(shape), "dtype": dtype, "layout": layout}


def expected(inputs, outputs, nodes, prims=None):
    out = {"inputs": inputs, "outputs": outputs,
           "nodes": {"total": sum(nodes.values()), **nodes}}
    if prims:
        out["prims"] = {"total": sum(prims.values()), **prims}
    return out


def check(model, input_info, want):
    graph, _ = from_torch(model.eval(), input_info)
    assert graph.inspect() == want


B = ("bz", 1)  # (dynamic, static) batch


def cases(bz):
    """(id, model factory, input_info, expected) rows for batch ``bz``."""
    dyn = bz == "bz"
    shape_prim = {"shape": 1} if dyn else None
    x4 = [([bz, 3, 10, 10], "float32")]
    rows = []

    def add(name, make, info, inputs, outputs, nodes, prims=shape_prim):
        rows.append((name, make, info, expected(inputs, outputs, nodes, prims)))

    nchw_in = [io("inp_0", [bz, 3, 10, 10], layout="NCHW")]
    abcd_in = [io("inp_0", [bz, 3, 10, 10], layout="ABCD")]
    add("conv1d", one(lambda: nn.Conv1d(3, 6, 7)), [([bz, 3, 10], "float32")],
        [io("inp_0", [bz, 3, 10], layout="NCW")], [io("conv1d", [bz, 6, 4], layout="NCW")],
        {"input": 1, "msc.conv1d_bias": 1})
    add("conv1d_nobias", one(lambda: nn.Conv1d(3, 6, 7, bias=False)),
        [([bz, 3, 10], "float32")], [io("inp_0", [bz, 3, 10], layout="NCW")],
        [io("conv1d", [bz, 6, 4], layout="NCW")], {"input": 1, "nn.conv1d": 1})
    add("conv2d", one(lambda: nn.Conv2d(3, 6, 7)), x4, nchw_in,
        [io("conv2d", [bz, 6, 4, 4], layout="NCHW")], {"input": 1, "msc.conv2d_bias": 1})
    add("conv2d_nobias", one(lambda: nn.Conv2d(3, 6, 7, bias=False)), x4, nchw_in,
        [io("conv2d", [bz, 6, 4, 4], layout="NCHW")], {"input": 1, "nn.conv2d": 1})
    add("linear", one(lambda: nn.Linear(10, 7)), x4, nchw_in,
        [io("matmul", [bz, 3, 10, 7], layout="NCHW")], {"input": 1, "msc.linear_bias": 1})
    add("linear_nobias", one(lambda: nn.Linear(10, 7, bias=False)), x4, nchw_in,
        [io("matmul", [bz, 3, 10, 7], layout="NCHW")], {"input": 1, "msc.linear": 1})
    add("bmm", fn(torch.bmm, 2), [((bz, 128, 256), "float32"), ((bz, 256, 512), "float32")],
        [io("inp_0", [bz, 128, 256], layout="NCD"), io("inp_1", [bz, 256, 512], layout="NIO")],
        [io("matmul", [bz, 128, 512], layout="NCD")], {"input": 2, "matmul": 1})
    bmm_info = [((bz, 128, 512), "float32"), ((bz, 128, 256), "float32"),
                ((bz, 256, 512), "float32")]
    add("baddbmm", fn(torch.baddbmm, 3), bmm_info,
        [io("inp_0", [bz, 128, 512], layout="NCD"), io("inp_1", [bz, 128, 256], layout="NCD"),
         io("inp_2", [bz, 256, 512], layout="NIO")],
        [io("add", [bz, 128, 512], layout="NCD")], {"input": 3, "matmul": 1, "add": 1})
    add("baddbmm_beta0", fn(lambda c, x, y: torch.baddbmm(c, x, y, alpha=2, beta=0), 3),
        bmm_info,
        [io("inp_0", [bz, 128, 512]), io("inp_1", [bz, 128, 256], layout="NCD"),
         io("inp_2", [bz, 256, 512], layout="NIO")],
        [io("multiply", [bz, 128, 512], layout="NCD")],
        {"input": 3, "matmul": 1, "constant": 1, "multiply": 1})
    add("relu", one(nn.ReLU), [([bz, 10], "float32")], [io("inp_0", [bz, 10], layout="AB")],
        [io("relu", [bz, 10], layout="AB")], {"input": 1, "nn.relu": 1})
    add("F.relu", fn(F.relu), [([bz, 10], "float32")], [io("inp_0", [bz, 10], layout="AB")],
        [io("relu", [bz, 10], layout="AB")], {"input": 1, "nn.relu": 1})
    add("relu6", one(nn.ReLU6), [([bz, 10], "float32")], [io("inp_0", [bz, 10])],
        [io("clip", [bz, 10])], {"input": 1, "clip": 1})
    for k, (make, hw) in enumerate([(lambda: nn.MaxPool2d([1, 1]), 10),
                                    (lambda: nn.MaxPool2d([2, 2], dilation=[2, 3]), 4),
                                    (lambda: nn.MaxPool2d([4, 4], padding=2, stride=2), 6)]):
        add(f"maxpool2d_{k}", one(make), x4, nchw_in,
            [io("max_pool2d", [bz, 3, hw, hw], layout="NCHW")], {"input": 1, "nn.max_pool2d": 1})
    for k, (make, hw) in enumerate([(lambda: nn.AvgPool2d([1, 1]), 10),
                                    (lambda: nn.AvgPool2d([4, 4], 2, 2, ceil_mode=True), 6)]):
        add(f"avgpool2d_{k}", one(make), x4, nchw_in,
            [io("avg_pool2d", [bz, 3, hw, hw], layout="NCHW")], {"input": 1, "nn.avg_pool2d": 1})
    add("adaptive_avgpool2d", one(lambda: nn.AdaptiveAvgPool2d([10, 10])), x4, nchw_in,
        [io("adaptive_avg_pool2d", [bz, 3, 10, 10], layout="NCHW")],
        {"input": 1, "nn.adaptive_avg_pool2d": 1})
    dim = "dim" if dyn else 10
    add("flatten", one(lambda: nn.Flatten(2, -1)), [([bz, 3, 10, dim], "float32")],
        [io("inp_0", [bz, 3, 10, dim])], [io("reshape", [bz, 3, "MUL_3" if dyn else 100])],
        {"input": 1, "reshape": 1}, {"shape": 2, "Int": 1, "Mul": 1} if dyn else None)
    add("batchnorm2d", one(lambda: nn.BatchNorm2d(3)), x4, nchw_in,
        [io("batch_norm.0", [bz, 3, 10, 10], layout="NCHW")],
        {"input": 1, "nn.batch_norm": 1, "get_item": 1})
    vocab = "vocab" if dyn else 4
    add("embedding", one(lambda: nn.Embedding(10, 3)), [([vocab], "int64")],
        [io("inp_0", [vocab], "int64", "A")], [io("take", [vocab, 3], layout="AB")],
        {"input": 1, "msc.embedding": 1})
    add("embedding_2d", one(lambda: nn.Embedding(10, 3)), [([vocab, 5], "int64")],
        [io("inp_0", [vocab, 5], "int64", "AB")],
        [io("take", [vocab, 5, 3], layout="" if dyn else "CBA")],  # as test_graph_build
        {"input": 1, "msc.embedding": 1}, {"shape": 1, "Int": 1, "Mul": 1} if dyn else None)
    for name, make in [("dropout", one(lambda: nn.Dropout(0.5))),
                       ("torch.dropout", fn(lambda x: torch.dropout(x, 0.5, train=True)))]:
        add(name, make, x4, [io("inp_0", [bz, 3, 10, 10])], [io("inp_0", [bz, 3, 10, 10])],
            {"input": 1})
    add("layernorm", one(lambda: nn.LayerNorm((10, 10))), x4, nchw_in,
        [io("layer_norm", [bz, 3, 10, 10], layout="NCHW")], {"input": 1, "nn.layer_norm": 1})
    add("F.layer_norm", _FunctionalLayerNorm, x4, nchw_in,
        [io("layer_norm", [bz, 3, 10, 10], layout="NCHW")], {"input": 1, "nn.layer_norm": 1})
    ce_info = [([bz, 2], "float32"), ([bz], "int32")]
    ce_in = [io("inp_0", [bz, 2]), io("inp_1", [bz], "int32")]
    for name, make, nodes in [
            ("cross_entropy", lambda: LossOf(nn.CrossEntropyLoss()), {}),
            ("cross_entropy_weight", lambda: LossOf(nn.CrossEntropyLoss(torch.ones(2))),
             {"constant": 1}),
            ("cross_entropy_sum", lambda: LossOf(nn.CrossEntropyLoss(ignore_index=1,
                                                                    reduction="sum")), {})]:
        add(name, make, ce_info, ce_in, [io("nll_loss", [])],
            {"input": 2, "nn.log_softmax": 1, **nodes, "nn.nll_loss": 1})
    add("silu", one(nn.SiLU), x4, abcd_in, [io("silu", [bz, 3, 10, 10], layout="ABCD")],
        {"input": 1, "nn.silu": 1})
    add("groupnorm", one(lambda: nn.GroupNorm(3, 3)), x4, nchw_in,
        [io("group_norm", [bz, 3, 10, 10], layout="NCHW")], {"input": 1, "nn.group_norm": 1})
    add("softmax", one(lambda: nn.Softmax(dim=1)), x4, abcd_in,
        [io("softmax", [bz, 3, 10, 10], layout="ABCD")], {"input": 1, "nn.softmax": 1})
    x4x2 = x4 + x4
    two_in = abcd_in + [io("inp_1", [bz, 3, 10, 10], layout="ABCD")]
    for op, name, dtype in [(lambda a, b: a + b, "add", "float32"),
                            (lambda a, b: a - b, "subtract", "float32"),
                            (lambda a, b: a * b, "multiply", "float32"),
                            (lambda a, b: a / b, "divide", "float32"),
                            (lambda a, b: a // b, "floor_divide", "float32"),
                            (lambda a, b: a ** b, "power", "float32"),
                            (lambda a, b: a < b, "less", "bool")]:
        add(f"binary_{name}", fn(op, 2), x4x2, two_in,
            [io(name, [bz, 3, 10, 10], dtype, "ABCD")], {"input": 2, name: 1})
        add(f"binary_{name}_scalar", fn(lambda a, op=op: op(a, 1.0)), x4, abcd_in,
            [io(name, [bz, 3, 10, 10], dtype, "ABCD")], {"input": 1, "constant": 1, name: 1})
    for name, make in [("size", fn(lambda x: x.size())), ("shape", fn(lambda x: x.shape))]:
        add(name, make, x4, [io("inp_0", [bz, 3, 10, 10])], [io("shape", [4], "int32", "O")],
            {"input": 1, "shape": 1})
    sq = "bz" if dyn else 10
    add("squeeze", fn(lambda x: x.squeeze(1)), [([sq, 1, 4, 1], "float32")],
        [io("inp_0", [sq, 1, 4, 1], layout="ADBC")], [io("squeeze", [sq, 4, 1], layout="ABC")],
        {"input": 1, "squeeze": 1})
    add("squeeze_all", fn(lambda x: x.squeeze()), [([sq, 1, 4, 1], "float32")],
        [io("inp_0", [sq, 1, 4, 1], layout="ACBD")], [io("squeeze", [sq, 4], layout="AB")],
        {"input": 1, "squeeze": 1})
    for name, f_, layout, shape in [("unsqueeze", lambda x: x.unsqueeze(1), "ACDE",
                                     [bz, 1, 3, 10, 10]),
                                    ("unsqueeze_neg", lambda x: x.unsqueeze(-1), "ABCE",
                                     [bz, 3, 10, 10, 1])]:
        add(name, fn(f_), x4, [io("inp_0", [bz, 3, 10, 10], layout=layout)],
            [io("expand_dims", shape, layout="ABCDE")], {"input": 1, "expand_dims": 1})
    add("getitem", fn(lambda x: x[0, 1::2, :, :3]), x4, abcd_in,
        [io("reshape", [1, 10, 3], layout="BCD")],
        {"input": 1, "strided_slice": 1, "reshape": 1})
    add("getitem_none", fn(lambda x: x[:, None, None, :, None]), [([bz, 16], "float32")],
        [io("inp_0", [bz, 16], layout="AB")],
        [io("reshape", [bz, 1, 1, 16, 1], layout="CDAEB")],
        {"input": 1, "strided_slice": 1, "reshape": 1})
    for name in ("sin", "cos", "exp", "sqrt", "sigmoid", "round", "tanh", "rsqrt"):
        add(name, fn(getattr(torch, name)), x4, abcd_in,
            [io(name, [bz, 3, 10, 10], layout="ABCD")], {"input": 1, name: 1})
    add("neg", fn(lambda x: -x), x4, abcd_in, [io("negative", [bz, 3, 10, 10], layout="ABCD")],
        {"input": 1, "negative": 1})
    add("gelu", fn(F.gelu), x4, abcd_in, [io("gelu", [bz, 3, 10, 10], layout="ABCD")],
        {"input": 1, "nn.gelu": 1})
    add("clamp", fn(lambda x: torch.clamp(x, min=0.1, max=0.5)), x4,
        [io("inp_0", [bz, 3, 10, 10])], [io("clip", [bz, 3, 10, 10])], {"input": 1, "clip": 1})
    add("interpolate", fn(lambda x: F.interpolate(x, (5, 5))), x4, nchw_in,
        [io("resize2d", [bz, 3, 5, 5], layout="NCHW")], {"input": 1, "image.resize2d": 1})
    splits = [1, 1, 1]
    for name, f_, sizes_ in [("split", lambda x: torch.split(x, 1, dim=1), splits),
                             ("split_sizes", lambda x: torch.split(x, [1, 2], dim=1), [1, 2]),
                             ("chunk", lambda x: torch.chunk(x, 3, dim=1), splits)]:
        add(name, fn(f_), x4, abcd_in,
            [io(f"split_{k}", [bz, s, 10, 10], layout="ABCD") for k, s in enumerate(sizes_)],
            {"input": 1, "split": 1})
    add("unbind", fn(lambda x: torch.unbind(x, dim=1)), x4, abcd_in,
        [io(f"tuple_{k}", [bz, 10, 10], layout="ACD") for k in range(3)],
        {"input": 1, "split": 1, "get_item": 3, "squeeze": 3, "tuple": 1})
    add("cumsum", fn(lambda x: torch.cumsum(x, dim=1, dtype=torch.int32)),
        [([bz, 2, 3, 4], "float32")], [io("inp_0", [bz, 2, 3, 4])],
        [io("cumsum", [bz, 2, 3, 4], "int32")], {"input": 1, "cumsum": 1})
    add("fill_", fn(_fill), [([bz, 10], "float32")], [io("inp_0", [bz, 10])],
        [io("full" if dyn else "const", [bz, 10])],
        {"input": 1, "constant": 1, "full": 1} if dyn else {"input": 1, "constant": 1})
    for name, f_, kind in [("tril", lambda x: torch.tril(x, 1), "tril"),
                           ("tril_", _tril_, "tril"),
                           ("triu", lambda x: torch.triu(x, 1), "triu"),
                           ("triu_", _triu_, "triu")]:
        rc = ["row", "col"] if dyn else [10, 10]
        add(name, fn(f_), [(rc, "float32")], [io("inp_0", rc)], [io(kind, rc)],
            {"input": 1, kind: 1}, {"shape": 2} if dyn else None)
    for name, f_ in [("expand", lambda x: x.expand(4, 2, 3, 4)),
                     ("expand_neg", lambda x: x.expand(4, -1, -1, 4))]:
        add(name, fn(f_), [([bz, 2, 3, 4], "float32")], [io("inp_0", [bz, 2, 3, 4])],
            [io("broadcast_to", [4, 2, 3, 4])], {"input": 1, "broadcast_to": 1})
    add("sum", fn(lambda x: torch.sum(x, (2, 1))), [([bz, 2, 3, 4], "float32")],
        [io("inp_0", [bz, 2, 3, 4], layout="ACDB")], [io("sum", [bz, 4], layout="AB")],
        {"input": 1, "sum": 1})
    for name, f_, dtype in [("float", lambda x: x.float(), "float32"),
                            ("half", lambda x: x.half(), "float16"),
                            ("type", lambda x: x.type(torch.float32), "float32"),
                            ("to", lambda x: x.to(torch.float16), "float16")]:
        add(name, fn(f_), [([bz, 2, 3, 4], "float32")],
            [io("inp_0", [bz, 2, 3, 4], layout="ABCD")],
            [io("astype", [bz, 2, 3, 4], dtype, "ABCD")], {"input": 1, "astype": 1})
    add("to_device", fn(lambda x: x.to("cpu")), [([bz, 256], "float32")],
        [io("inp_0", [bz, 256])], [io("inp_0", [bz, 256])], {"input": 1})
    ch = "channel" if dyn else 2
    add("permute", fn(lambda x: x.permute(0, 3, 2, 1)), [([bz, ch, 3, 4], "float32")],
        [io("inp_0", [bz, ch, 3, 4], layout="ADCB")],
        [io("permute_dims", [bz, 4, 3, ch], layout="ABCD")], {"input": 1, "permute_dims": 1},
        {"shape": 2} if dyn else None)
    hid = "hidden" if dyn else 4
    add("transpose", fn(lambda x: x.transpose(1, 3)), [([bz, 2, 3, hid], "float32")],
        [io("inp_0", [bz, 2, 3, hid], layout="ADCB")],
        [io("permute_dims", [bz, hid, 3, 2], layout="ABCD")], {"input": 1, "permute_dims": 1},
        {"shape": 2} if dyn else None)
    for name, f_ in [("reshape", lambda x: x.reshape(-1, 12)), ("view", lambda x: x.view(-1, 12))]:
        add(name, fn(f_), [([bz, 2, 3, 4], "float32")], [io("inp_0", [bz, 2, 3, 4])],
            [io("reshape", ["MUL_2" if dyn else 2, 12])], {"input": 1, "reshape": 1},
            {"shape": 1, "Int": 1, "Mul": 1} if dyn else None)
    add("unit_tuple", fn(lambda x: (x,)), [([bz, 256], "float32")], [io("inp_0", [bz, 256])],
        [io("tuple", [bz, 256])], {"input": 1, "tuple": 1})
    add("argmax", fn(lambda x: torch.argmax(x, dim=-1, keepdim=True)),
        [([bz, 256], "float32")], [io("inp_0", [bz, 256])], [io("argmax", [bz, 1], "int64")],
        {"input": 1, "argmax": 1})
    add("argmin", fn(torch.argmin), [([bz, 256], "float32")], [io("inp_0", [bz, 256])],
        [io("argmin", [], "int64")], {"input": 1, "argmin": 1})
    add("mean", fn(lambda x: x.mean(-1)), [([bz, 256], "float32")],
        [io("inp_0", [bz, 256], layout="AB")], [io("mean", [bz], layout="A")],
        {"input": 1, "mean": 1})
    add("max", fn(torch.max, 2), [([bz, 256], "float32")] * 2,
        [io("inp_0", [bz, 256], layout="AB"), io("inp_1", [bz, 256], layout="AB")],
        [io("maximum", [bz, 256], layout="AB")], {"input": 2, "maximum": 1})
    cdim = "dim" if dyn else 3
    add("cat", fn(lambda a, b, c: torch.cat((a, b, c), dim=1), 3),
        [([bz, cdim, 10, 10], "float32")] * 3,
        [io(f"inp_{k}", [bz, cdim, 10, 10]) for k in range(3)],
        [io("concat", [bz, "MUL_3" if dyn else 9, 10, 10], layout="ABCD")],
        {"input": 3, "concat": 1}, {"shape": 2, "Int": 1, "Mul": 1} if dyn else None)
    sdpa_seq = "seq" if dyn else 128
    qkv = [([1, 8, sdpa_seq, 64], "float32")] * 3
    qkv_in = [io(f"inp_{k}", [1, 8, sdpa_seq, 64], layout="ACBD") for k in range(3)]
    for name, f_ in [("sdpa", F.scaled_dot_product_attention),
                     ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(
                         q, k, v, is_causal=True))]:
        add(name, fn(f_, 3), qkv, qkv_in,
            [io("attention", [1, 8, sdpa_seq, 64], layout="ABCD")],
            {"input": 3, "msc.attention": 1})
    add("sdpa_mask", fn(F.scaled_dot_product_attention, 4),
        qkv + [([1, 8, sdpa_seq, sdpa_seq], "float32")],
        qkv_in + [io("inp_3", [1, 8, sdpa_seq, sdpa_seq], layout="ABCD")],
        [io("attention_bias", [1, 8, sdpa_seq, 64], layout="ABCD")],
        {"input": 4, "msc.attention": 1})
    sbz = "bz" if dyn else 20  # test_scatter / test_masked_scatter of test_graph_build
    add("scatter_const_index", lambda: _Scatter(), [([sbz, 20], "float32"), ([2, 5], "float32")],
        [io("inp_0", [sbz, 20]), io("inp_1", [2, 5])], [io("scatter_elements", [sbz, 20])],
        {"input": 2, "constant": 1, "scatter_elements": 1})
    add("scatter", fn(lambda d, i, s: d.scatter(0, i, s), 3),
        [([sbz, 20], "float32"), ([2, 5], "int64"), ([2, 5], "float32")],
        [io("inp_0", [sbz, 20]), io("inp_1", [2, 5], "int64"), io("inp_2", [2, 5])],
        [io("scatter_elements", [sbz, 20])], {"input": 3, "scatter_elements": 1})
    mdim = "dim" if dyn else 5
    masked = fn(lambda d, m, s: d.masked_scatter(m, s), 3)
    add("masked_scatter_1d", masked, [([mdim], "float32"), ([mdim], "bool"), ([10], "float32")],
        [io("inp_0", [mdim], layout="A"), io("inp_1", [mdim], "bool", "A"),
         io("inp_2", [10], layout="A")], [io("where", [mdim], layout="A")],
        {"input": 3, "cumsum": 1, "constant": 1, "subtract": 1, "take": 1, "where": 1})
    two = "" if dyn else "BA"  # [2, dim] -> [2 * dim] has no provable axis match
    add("masked_scatter_2d", masked,
        [([2, mdim], "float32"), ([2, mdim], "bool"), ([3, mdim], "float32")],
        [io("inp_0", [2, mdim], layout=two), io("inp_1", [2, mdim], "bool", two),
         io("inp_2", [3, mdim], layout=two)], [io("where", [2, mdim], layout=two)],
        {"input": 3, "reshape": 3, "cumsum": 1, "constant": 1, "subtract": 1, "take": 1,
         "where": 1}, {"shape": 1, "Int": 2, "Mul": 2} if dyn else None)
    return rows


class _Scatter(nn.Module):
    def __init__(self):
        super().__init__()
        self.index = torch.randint(0, 5, (2, 5), generator=torch.Generator().manual_seed(0))

    def forward(self, data, src):
        return data.scatter(dim=0, index=self.index, src=src)


def _fill(x):
    x.fill_(1.5)
    return x


def _tril_(x):
    x.tril_(1)
    return x


def _triu_(x):
    x.triu_(1)
    return x


class _FunctionalLayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(10, 10))
        self.bias = nn.Parameter(torch.zeros(10, 10))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)



ROWS = [(dyn, row) for dyn in (True, False) for row in cases("bz" if dyn else 1)]


@pytest.mark.parametrize("row", [pytest.param(r, id=f"{r[0]}-{'dyn' if d else 'static'}")
                                 for d, r in ROWS])
def test_inspect(row):
    _, make, info, want = row
    check(make(), info, want)


def test_creation_folds_to_constants():
    """Tensors built from nothing but constants fold (from_relax runs FoldConstant)."""
    info = [([10, 10], "float32")]
    for f_, shape, dtype in [(lambda x: torch.arange(0, 20, dtype=torch.int32), [20], "int32"),
                             (lambda x: torch.empty((10, 10)), [10, 10], "float32"),
                             (lambda x: torch.tensor(3, dtype=torch.float32), [], "float32"),
                             (lambda x: torch.tensor(3), [], "int64"),
                             (lambda x: x.new_ones(1, 2, 3), [1, 2, 3], "float32")]:
        check(Fn(f_), info, expected([io("inp_0", [10, 10])], [io("const", shape, dtype)],
                                     {"input": 1, "constant": 1}))


def test_weight_aliases_are_state_dict_keys():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 8 * 8, 10), nn.LayerNorm(10)).eval()
    graph, weights = from_torch(model, [(["bz", 3, 10, 10], "float32")])
    aliases = {t.alias: t for t in graph.get_weights()}
    assert set(aliases) == set(model.state_dict()) - {"1.num_batches_tracked"}
    for key, value in model.state_dict().items():
        if key in aliases:
            assert (weights[aliases[key].name] == value.numpy()).all(), key
            assert graph.find_tensor(key) is not None


def test_weight_aliases_of_equal_tensors_pair_in_order():
    """Fresh LayerNorms hold equal weights; each still gets its own key."""
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 4), nn.LayerNorm(4))
    graph, _ = from_torch(model.eval(), [([2, 4], "float32")])
    by_node = {(n.name, role): t.alias for n in graph.get_nodes()
               for role, t in n.get_weights().items()}
    assert by_node[("layer_norm", "gamma")] == "1.weight"
    assert by_node[("layer_norm_1", "gamma")] == "3.weight"
    assert by_node[("matmul_1", "weight")] == "2.weight"


def test_weight_aliases_of_converter_constants_follow_msc():
    """Constants the model does not own are named after their node (msc-conventions 4.4)."""
    graph, _ = from_torch(Fn(lambda x: x + 1.0), [([2, 4], "float32")])
    (const,) = [n for n in graph.get_nodes() if n.optype == "constant"]
    assert const.weight_at("const").alias == "const"
