"""The int8 global average pool of 1x1 planes as a byte table (int8/pool.py): every input
code gives the pool kernel's own bytes, in the Python call and in the native chain step."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.kernels.int8.pool import QAvgPool

_NP = {"uint8": np.uint8, "int8": np.int8}


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("out", [("u8", 0.037, 3), ("s8", 0.021, -5), "f32", ("u8", 0.5, 128)],
                         ids=str)
def test_one_pixel_table_gives_the_pool_kernels_bytes(dtype, out):
    zero = 9 if dtype == "uint8" else -119
    x = np.arange(256, dtype=np.uint8).view(_NP[dtype]).reshape(16, 16, 1, 1).copy()
    table, pool = (QAvgPool(dtype, (0.0517, zero), None, None, None, False, out)
                   for _ in range(2))
    pool._one_pixel = lambda shape: None  # the pool kernel itself
    got, want = (np.empty((16, 16), table.dtype) for _ in range(2))
    table(x, got)
    pool(x, want)
    assert table._lut is not None
    np.testing.assert_array_equal(got, want)
    entry = table.native_signature([((16, 16, 1, 1), x.dtype), ((16, 16), table.dtype)])
    assert entry is not None  # a chain step: the byte table's
    assert table.native_signature([((16, 16, 2, 1), x.dtype), ((16, 16), table.dtype)]) \
        != entry  # other planes: the pool kernel's own step
