"""``tvm.nd`` for msc: host arrays the VirtualMachine takes and returns.

    from msc import nd
    x = nd.array(np.ones((1, 784), "float32"))      # TVM: tvm.nd.array(...)
    vm["main"](x).numpy()
"""

from __future__ import annotations

import numpy as np

from .backend.runtime.arrays import NDArray, cpu, to_numpy

__all__ = ["NDArray", "array", "empty"]


def array(value, device=None) -> NDArray:
    """``value`` (numpy, a torch tensor through dlpack, an NDArray) as a C-contiguous NDArray
    that owns its memory, like ``tvm.nd.array``."""
    return NDArray(np.array(to_numpy(value, "array"), copy=True), device or cpu())


def empty(shape, dtype: str = "float32", device=None) -> NDArray:
    return NDArray(np.empty(tuple(shape), dtype), device or cpu())
