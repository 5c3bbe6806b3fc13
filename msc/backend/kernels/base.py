"""The types a call's implementation is described with, shared by kernels and the build.

A kernels module attaches a :class:`KernelFact` as the op's ``"kernel"`` fact. At build time the
fact sees the call site (:class:`Site`: arg struct info, constant args such as weights, the
fused epilogue) and makes a :class:`Kernel` once per site, so weights are packed there, not per
call. :class:`Impl` is how a resolved call node runs::

    attach("nn.dense", "kernel", DenseFact())      # from a kernels module
    fact = kernel_fact("nn.dense")                 # read back by the build
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ShapeError
from ...relax.expr import Attrs
from ...relax.op.registry import OPS
from ...relax.struct_info import TensorStructInfo
from ..runtime.arrays import data_address
from ..runtime.program import NOVALUE

__all__ = ["Impl", "Kernel", "KernelFact", "Site", "f32_address", "kernel_fact",
           "view_address"]


@dataclass
class Site:
    """One call as a kernel fact sees it at build time.

    ``args`` are the program's Values (``.sinfo``, ``.const``); ``epilogue`` is what fusion
    folded into the call: ``("bias", b)``, ``("scale", s)`` (per-channel 1-D arrays) and
    ``("relu",)`` entries, in order.
    """

    op: str
    attrs: Attrs
    args: list
    out: Any
    epilogue: tuple = ()
    call: Any = None  # the Relax Call (legalization reads it)

    def tensor(self, i: int) -> TensorStructInfo | None:
        s = self.args[i].sinfo if i < len(self.args) else None
        return s if isinstance(s, TensorStructInfo) else None

    def const(self, i: int) -> np.ndarray | None:
        value = self.args[i].const if i < len(self.args) else NOVALUE
        return value if isinstance(value, np.ndarray) else None

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default) if self.attrs is not None else default


class Kernel:
    """A native kernel made for one site: ``kernel(*arrays, out) -> out``.

    ``inputs`` are the indices of the call's args passed at run time (constants consumed at
    build time, such as packed weights, are left out). A kernel checks the shapes and dtypes
    it is given before native code runs, and raises ShapeError.
    """

    inputs: tuple = (0,)
    allocates: bool = False  # True: returns a fresh output (data-dependent shape), no buffer

    def __call__(self, *arrays):
        raise NotImplementedError


class KernelFact:
    """The "kernel" fact of an op. ``epilogues`` lists what fusion may fold into it; ``path``
    is what ``ex.stats`` counts it as ("numpy" for a numpy kernel that writes into a planned
    buffer, so the numbers stay honest about what runs natively)."""

    epilogues: frozenset = frozenset()
    path: str = "native"

    def match(self, site: Site) -> bool:
        """Whether :meth:`make` handles this site (dtypes, constant weights, attrs)."""
        raise NotImplementedError

    def epilogues_for(self, site: Site) -> frozenset:
        """The epilogue kinds this site can absorb (by default, ``epilogues``)."""
        return self.epilogues

    def channel_axis(self, site: Site) -> int | None:
        """The output axis a fused per-channel bias runs along."""
        return None

    def make(self, site: Site) -> Kernel:
        raise NotImplementedError


@dataclass
class Impl:
    """How a call node runs: ``fn(*inputs values, *dps buffers)``."""

    fn: Callable
    inputs: list             # value ids
    dps: tuple = ()          # TensorStructInfo of each output buffer
    path: str = "numpy"      # native | numpy | packed | tir | tir_interp
    aliases: bool = False    # the result may be a view of an input
    extra: dict = field(default_factory=dict)  # "func": packed / TIR name, "tir": the
    # CompiledPrimFunc when fn(*inputs, *buffers) is that kernel on the tuple-flattened inputs
    # and the buffers, returning the buffers: plans then call it natively


def kernel_fact(op: str) -> KernelFact | None:
    """The op's ``"kernel"`` fact, or None."""
    op_def = OPS.get(op)
    return op_def.facts.get("kernel") if op_def is not None else None


def f32_address(x, shape: tuple, op: str, param: str) -> int:
    """The data address of ``x`` once it is a C-contiguous float32 array of ``shape`` (a
    kernel's check before native code reads it), else a ShapeError naming ``param``."""
    if (type(x) is not np.ndarray or x.dtype != np.float32 or x.shape != shape
            or not x.flags.c_contiguous):
        raise ShapeError(f"expected a C-contiguous float32 array of shape {shape}, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}",
                         op=op, param=param)
    return view_address(x)


def view_address(x: np.ndarray) -> int:
    """``x.ctypes.data`` of a checked array, read from the array itself (runtime/arrays.py
    ``data_address``: ~0.3 us; ``.ctypes.data`` is 1-6 us a call, and a Llama forward of a
    small config read 40 of them, a fifth of its time)."""
    return data_address(x)
