"""from_torch's interface: tracing path selection and its report, one error listing every
unsupported op, custom converters, weights named by state_dict keys, models given as fx
GraphModules or ExportedPrograms."""

import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from msc import relax
from msc.errors import UnsupportedOpError, ValidationError
from msc.frontends.torch import translate_torch
from msc.frontends.torch.api import from_torch
from tests.helpers.torch_cases import Fn, Fn2
from tests.helpers.torch_tools import run_relax


class Loop(nn.Module):
    """fx cannot trace ``range(x.shape[1])``; torch.export can."""

    def forward(self, x):
        out = x[:, 0]
        for k in range(1, x.shape[1]):
            out = out + x[:, k]
        return out


class Unsupported(nn.Module):
    """Three ops without a converter, one of them twice."""

    def forward(self, x):
        a = torch.special.erfinv(x.clamp(-0.5, 0.5))
        b = torch.special.erfinv(x * 0.1)
        return torch.atan2(a, b) + torch.fmax(a, b)


def _info(*shape, dtype="float32"):
    return [(list(shape), dtype)]


def _check_numeric(mod, model, *inputs):
    with torch.no_grad():
        expected = model(*inputs)
    (got,) = run_relax(mod, [t.numpy() for t in inputs])
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)


# ---- tracing path ----------------------------------------------------------------------------

def test_fx_runs_first():
    result = translate_torch(nn.Sequential(nn.Linear(4, 2)), _info(3, 4))
    assert result.via == "fx" and result.reasons == {}
    assert result.info == {"via": "fx"}


def test_export_takes_over_when_fx_cannot_trace(caplog):
    with caplog.at_level(logging.WARNING, logger="msc.frontends.torch"):
        result = translate_torch(Loop(), _info(2, 3, 4))
    assert result.via == "export"
    assert "TypeError" in result.reasons["fx"] or "TraceError" in result.reasons["fx"]
    assert result.info["fx_error"] == result.reasons["fx"]
    assert any("trying torch.export" in r.message for r in caplog.records)
    _check_numeric(result.mod, Loop(), torch.randn(2, 3, 4))


def test_via_forces_the_path():
    assert translate_torch(nn.ReLU(), _info(2, 3), via="export").via == "export"
    with pytest.raises(Exception, match="Proxy|iterate|TypeError|range"):
        translate_torch(Loop(), _info(2, 3, 4), via="fx")
    with pytest.raises(ValidationError, match="via"):
        translate_torch(nn.ReLU(), _info(2, 3), via="jit")


def test_graph_module_and_exported_program_inputs():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    gm = torch.fx.symbolic_trace(model)
    assert translate_torch(gm, _info(1, 3, 8, 8)).via == "fx"
    ep = torch.export.export(model, (torch.randn(1, 3, 8, 8),))
    result = translate_torch(ep, _info(1, 3, 8, 8))
    assert result.via == "export"
    assert sorted(result.weight_names.values()) == ["0.bias", "0.weight"]


def test_dynamic_dims_share_names():
    mod = from_torch(Fn2(torch.add), [(["bz", 4], "float32"), (["bz", 4], "float32")],
                     as_msc=False)
    params = mod["main"].params
    assert params[0].struct_info.values[0] == params[1].struct_info.values[0]
    assert [p.name_hint for p in params] == ["inp_0", "inp_1"]


def test_export_dynamic_dims_keep_their_names():
    result = translate_torch(Loop(), [(["bz", 3, "n"], "float32")])
    assert result.via == "export"
    func = result.mod["main"]
    assert [str(d) for d in func.params[0].struct_info.values] == ["bz", "3", "n"]
    assert [str(d) for d in func.body.body.struct_info.values] == ["bz", "n"]
    _check_numeric(result.mod, Loop(), torch.randn(5, 3, 7))


# ---- unsupported ops -------------------------------------------------------------------------

def test_one_error_lists_every_unsupported_op():
    with pytest.raises(UnsupportedOpError) as info:
        translate_torch(Unsupported(), _info(2, 3), via="fx")
    items = {item["op"]: item for item in info.value.items}
    assert set(items) == {"torch.special.erfinv", "torch.atan2", "torch.fmax"}
    assert items["torch.special.erfinv"]["count"] == 2
    assert items["torch.special.erfinv"]["node"] == "special_erfinv"
    assert "custom_convert_map" in str(info.value)


def test_export_lists_aten_ops_and_fx_error_mentions_export():
    with pytest.raises(UnsupportedOpError) as info:
        translate_torch(Unsupported(), _info(2, 3))
    assert {i["op"] for i in info.value.items} == {"torch.special.erfinv", "torch.atan2",
                                                    "torch.fmax"}
    assert any("torch.export was tried" in note for note in info.value.__notes__)
    with pytest.raises(UnsupportedOpError) as info:
        translate_torch(Unsupported(), _info(2, 3), via="export")
    assert {i["op"] for i in info.value.items} == {"aten.special_erfinv.default",
                                                    "aten.atan2.default", "aten.fmax.default"}


def test_unsupported_arguments_are_listed_together():
    class Model(nn.Module):
        def forward(self, x):
            a = F.interpolate(x, scale_factor=2, mode="area")
            b = F.avg_pool2d(x, 2, divisor_override=3)
            return a.sum() + b.sum()

    with pytest.raises(UnsupportedOpError) as info:
        translate_torch(Model(), _info(1, 2, 4, 4), via="fx")
    assert [i["op"] for i in info.value.items] == ["F.interpolate", "F.avg_pool2d"]
    assert "mode='area'" in info.value.items[0]["error"]


def test_unsupported_module_is_traced_through_or_listed():
    """A torch module without a converter is not a leaf: its body is traced."""
    model = nn.Sequential(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                     batch_first=True)).eval()
    result = translate_torch(model, _info(2, 5, 8))
    with torch.no_grad():
        expected = model(torch.ones(2, 5, 8))
    (got,) = run_relax(result.mod, [np.ones((2, 5, 8), "float32")])
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)


# ---- custom converters -----------------------------------------------------------------------

def _erfinv(ctx, input):
    """A stand-in converter: 0.886 * x (the first term of erfinv's series)."""
    return ctx.emit(relax.op.multiply(input, relax.const(0.886, "float32")))


def test_custom_convert_map_adds_function_converters():
    model = Fn(lambda x: torch.special.erfinv(x) + 1)
    mod = from_torch(model, _info(2, 3), custom_convert_map={torch.special.erfinv: _erfinv},
                     as_msc=False)
    ops = [b.value.op.name for b in mod["main"].body.blocks[0].bindings
           if isinstance(b.value, relax.Call)]
    assert ops == ["relax.multiply", "relax.add"]


def test_custom_convert_map_by_name_and_for_aten():
    model = Fn(lambda x: torch.special.erfinv(x))
    for via in ("fx", "export"):
        result = translate_torch(model, _info(2, 3), {"special_erfinv": _erfinv}, via=via)
        assert result.via == via
    aten = torch.ops.aten.special_erfinv.default
    for key in (aten, "aten.special_erfinv.default", "special_erfinv.default"):
        result = translate_torch(model, _info(2, 3), {key: _erfinv}, via="export")
        assert "multiply" in result.mod.script()


def test_custom_convert_map_overrides_and_adds_modules():
    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)

    def as_silu(ctx, input):
        assert isinstance(ctx.module, Swish)
        return ctx.emit(relax.op.nn.silu(input))

    def relu_as_sigmoid(ctx, input, inplace=False):
        return ctx.emit(relax.op.sigmoid(input))

    model = nn.Sequential(Swish(), nn.ReLU())
    mod = from_torch(model, _info(2, 3), as_msc=False,
                     custom_convert_map={Swish: as_silu, nn.ReLU: relu_as_sigmoid})
    script = mod.script()
    assert "R.nn.silu" in script and "R.sigmoid" in script and "relu" not in script


def test_converter_signature_errors_name_the_node():
    def wrong(ctx, input):
        return input

    with pytest.raises(ValidationError, match="do not fit") as info:
        translate_torch(Fn(lambda x: torch.add(x, x, alpha=2)), _info(2), {"add": wrong})
    assert "add" in str(info.value)


# ---- weights ---------------------------------------------------------------------------------

def test_weight_names_are_state_dict_keys():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 5)).eval()
    for via in ("fx", "export"):
        names = translate_torch(model, _info(1, 3, 8, 8), via=via).weight_names
        assert sorted(names.values()) == sorted(set(model.state_dict())
                                                - {"1.num_batches_tracked"})
        state = model.state_dict()
        for const, key in names.items():
            np.testing.assert_array_equal(const.data, state[key].numpy())


def test_tied_weights_are_one_constant():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids):
            return self.head(self.embed(ids))

    result = translate_torch(Tied(), _info(2, 3, dtype="int64"))
    assert list(result.weight_names.values()) == ["embed.weight"]
    graph, _ = from_torch(Tied(), _info(2, 3, dtype="int64"))
    aliases = {n.optype: t.alias for n in graph.get_nodes() for t in n.get_weights().values()}
    # the head's weight is a folded transpose of the embedding: a separate graph weight
    assert aliases == {"msc.embedding": "embed.weight", "msc.linear": "matmul.weight"}


def test_constants_are_copies():
    model = nn.Sequential(nn.Linear(2, 2))
    result = translate_torch(model, _info(1, 2))
    with torch.no_grad():
        model[0].weight.add_(1.0)
    (const,) = [c for c, k in result.weight_names.items() if k == "0.weight"]
    assert not np.array_equal(const.data, model[0].weight.detach().numpy())
