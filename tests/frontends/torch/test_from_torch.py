"""from_torch per converter: each case translates statically and with a dynamic batch, its
Relax module computes what torch computes (on msc's VM and with the numpy reference of each
op), and its op sequence and struct info equal what TVM's from_fx produces (where TVM
converts the model correctly).
"""

import numpy as np
import pytest
import torch

from msc import relax
from msc.frontends.relax.translate import from_relax
from msc.frontends.torch import translate_torch
from tests.helpers.torch_cases import CASES
from tests.helpers.torch_tools import run_relax, run_vm, structure, torch_leaves, tvm_structures

KEYS = [(name, dynamic) for name, case in CASES.items()
        for dynamic in ((False, True) if case.dyn else (False,))]


def _ids(key):
    return f"{key[0]}-{'dyn' if key[1] else 'static'}"


@pytest.fixture(scope="module")
def translated():
    """Translate lazily, once per key (the numeric and TVM tests share the modules)."""
    cache = {}

    def get(name, dynamic):
        if (name, dynamic) not in cache:
            case = CASES[name]
            cache[(name, dynamic)] = translate_torch(case.model(), case.input_info(dynamic),
                                                     via="fx")
        return cache[(name, dynamic)]

    return get


EVALUATORS = {"vm": run_vm, "numpy": run_relax}


@pytest.mark.parametrize("evaluator", list(EVALUATORS))
@pytest.mark.parametrize("key", KEYS, ids=_ids)
def test_numeric(key, evaluator, translated):
    name, dynamic = key
    case = CASES[name]
    result = translated(name, dynamic)
    assert result.via == "fx"
    tensors = case.tensors()
    with torch.no_grad():
        expected = torch_leaves(case.model()(*[t.clone() for t in tensors]))
    got = EVALUATORS[evaluator](result.mod, [t.numpy() for t in tensors])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        assert str(g.dtype) == str(e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=case.atol)


TVM_KEYS = [k for k in KEYS if CASES[k[0]].tvm and not (CASES[k[0]].tvm == "static" and k[1])]


@pytest.fixture(scope="module")
def tvm_reference():
    pytest.importorskip("tvm")
    return tvm_structures(TVM_KEYS)


@pytest.mark.parametrize("key", TVM_KEYS, ids=_ids)
def test_structure_equals_tvm(key, translated, tvm_reference):
    name, dynamic = key
    expected = tvm_reference[key]
    assert "error" not in expected, f"TVM failed: {expected['error']}"
    got = structure(translated(name, dynamic).mod)
    if CASES[name].tvm == "ops":
        assert [op for op, _ in got["bindings"]] == [op for op, _ in expected["bindings"]]
    else:
        assert got == {k: expected[k] for k in got}


FULL_KEYS = [k for k in TVM_KEYS if CASES[k[0]].tvm == "full"]


@pytest.mark.parametrize("key", FULL_KEYS, ids=_ids)
def test_from_relax_of_tvm_text_equals_from_torch(key, translated, tvm_reference):
    """TVM's printed text of its own from_fx module (metadata constants passed in) gives the
    MSCGraph from_torch gives: names, optypes, shapes, layouts, prims."""
    expected = tvm_reference[key]
    assert "error" not in expected, f"TVM failed: {expected['error']}"
    consts = [np.array(v, dtype=d) for d, v in expected["constants"]]
    mod = relax.from_script(expected["script"], metadata={"ir.GenericConst": consts})
    got, want = from_relax(mod)[0].inspect(), from_relax(translated(*key).mod)[0].inspect()
    assert got == want
