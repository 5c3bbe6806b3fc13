"""Pruning four model families (and torch's own TransformerEncoderLayer, whose q/k/v are one
packed projection) at density 0.5 gives physically smaller graphs whose codegens
(to_torch, and to_relax run by relax.build + VirtualMachine) compute what a torch model pruned
*by hand* computes: the narrow torch model with each parameter indexed by torch from one kept
set per channel group (tests/helpers/prune_models.py). A wrong grouping in msc (a residual
partner, a concat slice, a group or a head pruned differently) changes the outputs.

Tolerance: float32, atol 1e-4 / rtol 1e-4 (a few matmuls and norms deep).
"""

import numpy as np
import pytest
import torch

from msc.codegen import to_relax, to_torch
from msc.compression.prune import prune
from msc.frontends.translate import from_torch
from tests.helpers import prune_models as pm
from tests.helpers.codegen import relax_build_and_run, torch_run


def _by_alias(graph, plan: dict) -> dict:
    return {graph.find_tensor(name).alias: entry for name, entry in plan.items()}


def _resnet_keep(plan, full):
    return {k: plan[f"{k}.weight"]["out_indices"] for k in ("stem", "l1.c1", "l2.c1", "l2.c2")}


def _mobile_keep(plan, full):
    per_group = full.g.out_channels // 4
    return {"stem": plan["stem.weight"]["out_indices"],
            "g.in": plan["g.weight"]["in_indices"],
            "g.out": [i for i in plan["gn.weight"]["out_indices"] if i < per_group]}


def _dense_keep(plan, full):
    t_out, half = plan["t.weight"]["out_indices"], full.half
    return {"stem": plan["stem.weight"]["out_indices"], "c1": plan["c1.weight"]["out_indices"],
            "c2": plan["c2.weight"]["out_indices"], "t.0": [i for i in t_out if i < half],
            "t.1": [i - half for i in t_out if i >= half]}


def _encoder_keep(plan, full):
    return {"heads": sorted({i // full.head_dim for i in plan["q.weight"]["out_indices"]}),
            "ff1": plan["ff1.weight"]["out_indices"]}


def _layer_keep(plan, full):
    d, hd = full.self_attn.embed_dim, full.self_attn.head_dim
    return {"heads": sorted({i // hd for i in plan["self_attn.in_proj_weight"]["out_indices"]
                             if i < d}),
            "ff1": plan["linear1.weight"]["out_indices"]}


# name: (model factory, input shape, keep reader, by-hand reference, expected narrow widths)
CASES = {
    "resnet": (pm.ResNet, (1, 3, 8, 8), _resnet_keep, pm.resnet_reference,
               {"stem": 8, "l1.c1": 8, "l2.c1": 16, "l2.c2": 16}),
    "mobilenet": (pm.Mobile, (1, 3, 8, 8), _mobile_keep, pm.mobile_reference,
                  {"stem": 8, "g.in": 4, "g.out": 4}),
    "densenet": (pm.Dense, (1, 3, 8, 8), _dense_keep, pm.dense_reference,
                 {"stem": 8, "c1": 4, "c2": 4, "t.0": 4, "t.1": 4}),
    "encoder": (pm.Encoder, (2, 5, 32), _encoder_keep, pm.encoder_reference,
                {"heads": 2, "ff1": 32}),
    "encoder_sdpa": (lambda: pm.Encoder(sdpa=True), (2, 5, 32), _encoder_keep,
                     pm.encoder_reference, {"heads": 2, "ff1": 32}),
    "torch_encoder_layer": (pm.torch_encoder_layer, (2, 5, 32), _layer_keep,
                            pm.encoder_layer_reference, {"heads": 2, "ff1": 32}),
}


@pytest.fixture(scope="module")
def pruned():
    cache = {}

    def get(name):
        if name not in cache:
            make, shape, read_keep, reference, _ = CASES[name]
            torch.manual_seed(0)
            full = pm.randomize_norms(make())
            graph, weights = from_torch(full, [(list(shape), "float32")])
            small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 1,
                                                            "latency": False})
            keep = read_keep(_by_alias(graph, report["plan"]), full)
            x = np.random.default_rng(0).standard_normal(shape).astype("float32")
            cache[name] = (graph, small, small_w, report, keep, reference(full, keep), x)
        return cache[name]
    return get


@pytest.mark.parametrize("name", CASES)
def test_widths_and_parameter_counts_drop_as_planned(name, pruned):
    _, small, small_w, report, keep, reference, _ = pruned(name)
    small.check()
    assert {k: len(v) for k, v in keep.items()} == CASES[name][4]
    constants = sum(w.get_size() for n in small.get_nodes() if n.optype == "constant"
                    for w in n.weights.values())  # scalars of the graph, not torch params
    want = constants + sum(v.numel() for k, v in reference.state_dict().items()
                           if not k.endswith("num_batches_tracked"))
    assert report["total"]["params"][1] == want == sum(a.size for a in small_w.values())
    assert report["total"]["params"][0] > want
    assert report["total"]["flops"][1] < report["total"]["flops"][0]
    for weight in small.get_weights():
        assert list(small_w[weight.name].shape) == weight.shape


@pytest.mark.parametrize("backend", ["torch", "relax"])
@pytest.mark.parametrize("name", CASES)
def test_codegen_equals_the_model_pruned_by_hand(name, backend, pruned, tmp_path):
    _, small, small_w, _, _, reference, x = pruned(name)
    with torch.no_grad():
        want = reference(torch.from_numpy(x)).numpy()
    if backend == "torch":
        got = torch_run(to_torch(small, small_w, {"need_test": False}, build_folder=tmp_path),
                        [x])
    else:
        mod = to_relax(small, small_w, {"need_test": False}, build_folder=tmp_path)
        got = relax_build_and_run(mod, [x])
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


def test_attrs_are_rewritten(pruned):
    """Reshape targets carry the head count, split points the new halves."""
    _, small, *_ = pruned("encoder")
    targets = {n.get_attr("shape") for n in small.get_nodes() if n.optype == "reshape"}
    assert "2,5,2,8" in targets and "2,5,16" in targets
    _, small, *_ = pruned("densenet")
    split = next(n for n in small.get_nodes() if n.optype == "split")
    assert split.get_attr("indices_or_sections") == "4,"
    _, small, *_ = pruned("mobilenet")
    groups = [n.get_type_attr("groups", int) for n in small.get_nodes()
              if n.optype == "msc.conv2d_bias"]
    assert groups == [1, 8, 1, 4]  # the depthwise conv has as many groups as channels left


def test_the_interface_stays(pruned):
    graph, small, *_ = pruned("resnet")
    assert [t.shape for t in small.get_inputs()] == [t.shape for t in graph.get_inputs()]
    assert [t.shape for t in small.get_outputs()] == [t.shape for t in graph.get_outputs()]
