"""The torch round trip, per converter case of tests/helpers/torch_cases.py: torch model -> from_torch
-> to_torch, and -> to_relax -> relax.build / VirtualMachine, computes what the torch model
computes eagerly (float32 within rtol 1e-5, atol 1e-5 -- or the case's own looser atol --,
integers exactly, same shapes and dtypes). Every case with static shapes; every case with a
dynamic variant also with its dynamic dims named, run at the case's batch and at another one.

A case that cannot round-trip is listed in KNOWN_GAPS with the reason (a strict xfail: one that
starts passing fails until it is taken off the list).
"""

import dataclasses

import numpy as np
import pytest
import torch

from msc.codegen import to_relax, to_torch
from msc.frontends.translate import from_torch
from tests.helpers.codegen import assert_outputs, relax_build_and_run, torch_run
from tests.helpers.torch_cases import CASES
from tests.helpers.torch_tools import torch_leaves

BACKENDS = ("torch", "relax")
OTHER_BATCH = 7  # the dynamic variants also run with their dynamic dims at this size (larger
# than every static size, so index inputs stay in range)

# (case, "static" | "dyn", backend) -> why the round trip does not hold.
KNOWN_GAPS: dict[tuple[str, str, str], str] = {
    ("F.sdpa_bool_mask", "dyn", "relax"):
        "the batch-7 mask has a fully masked row: torch's SDPA gives 0 there, the Relax "
        "module (where(mask, 0, -inf) + attention_bias) gives NaN",
}

KEYS = [(name, variant, backend) for name, case in CASES.items()
        for variant in (("static", "dyn") if case.dyn else ("static",))
        for backend in BACKENDS]


def _params() -> list:
    return [pytest.param(key, id="-".join(key), marks=[pytest.mark.xfail(
        strict=True, reason=KNOWN_GAPS[key])] if key in KNOWN_GAPS else []) for key in KEYS]


def _tensors(case, batch: int | None) -> list[torch.Tensor]:
    """The case's inputs; with ``batch``, its dynamic dims take that size."""
    if batch is None:
        return case.tensors()
    gen = torch.Generator().manual_seed(1)
    return [dataclasses.replace(inp, shape=tuple(batch if d in inp.dyn else n
                                                 for d, n in enumerate(inp.shape))).make(gen)
            for inp in case.inputs]


@pytest.fixture(scope="module")
def translated():
    """Translate once per (case, variant); both backends share the graph."""
    cache = {}

    def get(name: str, variant: str):
        if (name, variant) not in cache:
            case = CASES[name]
            cache[(name, variant)] = from_torch(case.model(),
                                                case.input_info(variant == "dyn"))
        return cache[(name, variant)]

    return get


def _build(backend: str, graph, weights, folder):
    if backend == "torch":
        model = to_torch(graph, weights, {"need_test": False}, build_folder=folder)
        return lambda inputs: torch_run(model, inputs)
    mod = to_relax(graph, weights, {"need_test": False}, build_folder=folder)
    return lambda inputs: relax_build_and_run(mod, inputs)


@pytest.mark.parametrize("key", _params())
def test_roundtrip_equals_torch(key, translated, tmp_path):
    name, variant, backend = key
    case = CASES[name]
    graph, weights = translated(name, variant)
    run = _build(backend, graph, weights, tmp_path)
    model = case.model()
    for batch in ((None, OTHER_BATCH) if variant == "dyn" else (None,)):
        tensors = _tensors(case, batch)
        with torch.no_grad():  # clones: some cases modify their inputs in place
            want = torch_leaves(model(*[t.clone() for t in tensors]))
        got = run([t.numpy().copy() for t in tensors])
        assert [str(np.asarray(g).dtype) for g in got] == [str(w.dtype) for w in want]
        assert_outputs(got, want, rtol=1e-5, atol=max(case.atol, 1e-5))


def test_known_gaps_name_existing_cases():
    assert sorted(set(KNOWN_GAPS) - set(KEYS)) == []
    assert all(reason.strip() for reason in KNOWN_GAPS.values())
