"""The torch.export path (ATen ops) on every converter case: the Relax module computes on
msc's VM what torch computes, static and with a dynamic batch; and every case builds an
MSCGraph whose outputs have torch's shapes and dtypes."""

import numpy as np
import pytest
import torch

from msc.frontends.torch import translate_torch
from msc.frontends.torch.api import from_torch
from tests.helpers.torch_cases import CASES
from tests.helpers.torch_tools import run_vm, torch_leaves

KEYS = [(name, dynamic) for name, case in CASES.items()
        for dynamic in ((False, True) if case.dyn else (False,))]


def _ids(key):
    return f"{key[0]}-{'dyn' if key[1] else 'static'}"


def _expected(case, tensors):
    with torch.no_grad():
        return torch_leaves(case.model()(*[t.clone() for t in tensors]))


@pytest.mark.parametrize("key", KEYS, ids=_ids)
def test_export_numeric(key):
    name, dynamic = key
    case = CASES[name]
    result = translate_torch(case.model(), case.input_info(dynamic), via="export")
    tensors = case.tensors()
    expected = _expected(case, tensors)
    got = run_vm(result.mod, [t.numpy() for t in tensors])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and str(g.dtype) == str(e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=case.atol)


@pytest.mark.parametrize("name", list(CASES))
def test_graph_outputs(name):
    case = CASES[name]
    graph, _ = from_torch(case.model(), case.input_info(False))
    graph.check()
    outputs = graph.inspect()["outputs"]
    expected = _expected(case, case.tensors())
    assert [(o["shape"], o["dtype"]) for o in outputs] == [
        (list(e.shape), str(e.dtype)) for e in expected]
