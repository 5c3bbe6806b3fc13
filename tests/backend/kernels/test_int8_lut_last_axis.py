"""Per-channel byte tables along the last axis (ConvNeXt's channels-last affine chains,
int8/lut.py): numpy's lookup, on one and two threads, from Python and as a chain step."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.kernels.int8 import lut as int8_lut
from msc.backend.kernels.int8.lut import QLut
from msc.backend.runtime.threads import num_threads


@pytest.mark.parametrize("table_dtype", [np.uint8, np.int8, np.float32])
@pytest.mark.parametrize("shape", [(16, 8, 8, 64), (2, 3, 5, 7)], ids=str)
def test_last_axis_tables_look_up_each_channel(shape, table_dtype, monkeypatch):
    monkeypatch.setattr(int8_lut, "_PARALLEL", 0)  # split on two threads
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    table = rng.integers(-128, 128, (shape[-1], 256)).astype(table_dtype)
    want = table[np.arange(shape[-1]), x.view(np.uint8)]
    kernel = QLut(table, len(shape) - 1)
    for threads in (1, 2):
        with num_threads(threads):
            np.testing.assert_array_equal(kernel(x, np.empty(shape, table_dtype)), want)
    assert kernel.native_signature([(shape, np.int8), (shape, table_dtype)]) is not None
