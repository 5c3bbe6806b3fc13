"""``msc prune`` (msc/cli/cmd_prune.py, called through its own argparse wiring) and the demo
step: files written, the pruned model loads back smaller, a plan re-applies, errors name the
file."""

import argparse
import importlib.util
import json

import numpy as np
import pytest
import torch

from msc.cli import cmd_prune
from msc.cli.loaders import load_model
from msc.errors import SerializationError, ValidationError
from msc.frontends.translate import from_torch
from tests.helpers import prune_models as pm


def _run(*argv) -> int:
    help_text, add_arguments, run = cmd_prune.COMMAND
    parser = argparse.ArgumentParser(prog="msc prune", description=help_text)
    add_arguments(parser)
    return run(parser.parse_args([str(a) for a in argv]))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prune_cli")
    torch.manual_seed(0)
    graph, weights = from_torch(pm.randomize_norms(pm.ResNet()), [([1, 3, 8, 8], "float32")])
    graph.to_json(folder / "net.json")
    np.savez(folder / "net.npz", **weights)
    return folder / "net.json", graph, weights


def test_prune_writes_a_smaller_model_its_plan_and_report(model_file, tmp_path, capsys):
    model, _, weights = model_file
    out = tmp_path / "small.json"
    assert _run(model, "--density", "0.5", "--no-latency", "-o", out) == 0
    assert "total params" in capsys.readouterr().out
    small, small_w = load_model(str(out))
    small.check()
    assert sum(a.size for a in small_w.values()) < sum(a.size for a in weights.values())
    report = json.loads((tmp_path / "small.report.json").read_text())
    assert report["total"]["params"][1] == sum(a.size for a in small_w.values())
    plan = json.loads((tmp_path / "small.plan.json").read_text())
    again = tmp_path / "again.json"
    assert _run(model, "--plan", tmp_path / "small.plan.json", "--no-latency", "-o", again) == 0
    assert json.loads(again.read_text()) == json.loads(out.read_text())
    assert json.loads((tmp_path / "again.plan.json").read_text()) == plan


def test_prune_errors_name_the_file(model_file, tmp_path):
    model, graph, _ = model_file
    out = tmp_path / "small.json"
    out.write_text("{}")
    with pytest.raises(SerializationError, match="exists") as err:
        _run(model, "--density", "0.5", "-o", out)
    assert str(out) in str(err.value)
    bad = tmp_path / "cfg.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SerializationError, match="JSON object"):
        _run(model, "--config", bad, "-o", tmp_path / "x.json")
    bare = tmp_path / "bare.json"
    graph.to_json(bare)  # no weights next to it
    with pytest.raises(ValidationError, match="weights missing"):
        _run(bare, "--density", "0.5", "--no-latency", "-o", tmp_path / "y.json")


FACTORY = '''
import torch
import transformers


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, return_dict=False)[0]


def make():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=64, attn_implementation="eager")
    return Logits(transformers.BertForMaskedLM(config)).eval()
'''


def _bert_files(folder):
    """A transformers BERT as ``file.py:factory`` and its ONNX export."""
    pytest.importorskip("transformers")
    source = folder / "bert_factory.py"
    source.write_text(FACTORY)
    spec = importlib.util.spec_from_file_location("bert_factory", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the test's own source, written above
    onnx_path = folder / "bert.onnx"
    torch.onnx.export(module.make(), (torch.zeros(1, 12, dtype=torch.long),),
                      str(onnx_path), dynamo=False, input_names=["ids"])
    return f"{source}:make", onnx_path


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_prune_a_transformers_factory_and_its_onnx_export(tmp_path):
    factory, onnx_path = _bert_files(tmp_path)
    runs = {"factory": [factory, "--input-info", "ids:1,12:int64"], "onnx": [onnx_path]}
    for name, model in runs.items():
        out = tmp_path / f"{name}.json"
        assert _run(*model, "--density", "0.5", "--stride", "1", "--no-latency", "-o", out) == 0
        small, _ = load_model(str(out))
        report = json.loads((tmp_path / f"{name}.report.json").read_text())
        assert report["total"]["params"][2] < 0.6  # heads, MLP width and hidden pruned
        assert [t.shape for t in small.get_outputs()] == [[1, 12, 256]]
        overlay = json.loads((tmp_path / f"{name}.overlay.json").read_text())
        assert overlay and set(overlay) <= set(small.node_names)
        assert all(0 < v <= 1 for v in overlay.values()) and min(overlay.values()) < 1
