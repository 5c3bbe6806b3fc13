"""One model of each corpus family (tests/helpers/corpus.py) through every user path,
compared with torch eager: each path must match (max error <= 1e-4 * max|torch|) or refuse
with a typed msc error that names the op. A wrong answer is never expected here.

The whole corpus is ``benchmarks/corpus.py`` (docs/real-models.md); this is its CI slice.
"""

from __future__ import annotations

import re
import warnings

import pytest

pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

from tests.helpers.corpus import PATHS, run_model

# Per family, the model that carries the most of what a converter can get wrong: timm's
# BatchNormAct2d (an nn.BatchNorm2d subclass applying its activation in forward) on the fx path,
# TF "same" padding (an nn.Conv2d subclass); shifted windows with a relative position bias;
# rotary embeddings, grouped-query attention and a causal mask.
MODELS = ("mobilenetv3", "tf_efficientnet", "swin", "llama")

@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each model runs once for all its paths; the parametrized tests read the cells."""
    cache: dict = {}

    def get(name: str) -> dict:
        if name not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name] = run_model(name, PATHS, tmp_path_factory.mktemp(name))
        return cache[name]
    return get


@pytest.mark.parametrize("name,path", [(m, p) for m in MODELS for p in PATHS],
                         ids=[f"{m}-{p}" for m in MODELS for p in PATHS])
def test_path_matches_torch_or_refuses(results, name, path):
    cell = results(name)[path]
    status, message = cell["status"], cell["message"]
    assert status != "WRONG", f"silent wrong answer: {message}"
    if status == "refused":  # typed, and saying which op: "op 'x'" or "(aten.x, ...)"
        # names the op ("op 'x'", "(aten.x, ...)") or, via="fx", the model fx cannot trace
        assert re.search(r"\bop '|\(\S.*\)$|torch\.fx cannot trace \w+", message), \
            f"refusal names no op: {message}"
        return
    assert status == "match", f"{status}: {message}"
