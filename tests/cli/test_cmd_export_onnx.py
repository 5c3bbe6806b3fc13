"""``msc export ... -o x.onnx --opset N --custom-domain [DOMAIN]`` reaches to_onnx."""

import onnx
import pytest
import torch

from msc.cli.main import main
from msc.codegen.files import save_npz
from msc.frontends import translate

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("flag, domain", [([], None), (["--custom-domain"], "ai.msc"),
                                          (["--custom-domain", "com.acme"], "com.acme")])
def test_export_onnx_opset_and_custom_domain(tmp_path, flag, domain):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()).eval()
    graph, weights = translate.from_torch(model, [([2, 4], "float32")])
    graph.to_json(str(tmp_path / "net.json"))
    save_npz(tmp_path / "net.npz", weights)
    out = tmp_path / "net.onnx"
    assert main(["export", str(tmp_path / "net.json"), "-o", str(out), "--opset", "13",
                 *flag]) == 0
    written = onnx.load(str(out))
    assert {(o.domain, o.version) for o in written.opset_import} >= {("", 13)}
    assert {n.domain for n in written.graph.node} - {""} == ({domain} if domain else set())
    assert [f.name for f in written.functions] == (["nn_gelu"] if domain else [])
