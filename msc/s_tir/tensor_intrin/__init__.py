"""Tensor intrinsics: TVM's ``TensorIntrin`` registry (``tvm.s_tir.tensor_intrin``).

A tensor intrinsic pairs a description (a prim func computing a small tile, e.g. a 16x4 int8
dot product) with an implementation of the same tile (e.g. one VNNI instruction); TVM's
``sch.tensorize`` replaces a loop nest that matches the description by the implementation.
The registry works as TVM's: ``TensorIntrin.register(name, desc, impl)`` and
``TensorIntrin.get(name)``. ``msc.s_tir.tensor_intrin.x86`` registers TVM's int8 dot products
(``dot_16x4_vnni``: the VNNI ``vpdpbusd`` instruction, ``dot_16x4_avx512``), which
``sch.tensorize`` puts in place and msc's backend compiles. The modules of TVM's other
targets (``arm_cpu``, ``hexagon``, ``rocm``, ``cuda``) give the intrinsics' names, so code
that imports them runs, and :meth:`TensorIntrin.get` refuses those names, saying why.

    >>> TensorIntrin.register("copy_4", desc, impl)          # doctest: +SKIP
    >>> TensorIntrin.get("copy_4").desc is desc              # doctest: +SKIP
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ScheduleError
from ...tir.function import PrimFunc

__all__ = ["TensorIntrin", "TensorIntrinNotFound", "declare_foreign"]

_REGISTRY: dict[str, TensorIntrin] = {}
_FOREIGN: dict[str, str] = {}  # name -> the target msc does not compile for


class TensorIntrinNotFound(ScheduleError, ValueError):
    """No intrinsic of that name (TVM raises ValueError)."""


def declare_foreign(target: str, names) -> None:
    """Names of another target's intrinsics (arm, hexagon, GPUs): known, never registered."""
    for name in names:
        _FOREIGN[name] = target


@dataclass(frozen=True)
class TensorIntrin:
    """A registered description / implementation pair of prim funcs."""

    desc: PrimFunc
    impl: PrimFunc

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> None:
        """Register ``name``; a second registration needs ``override=True`` (as in TVM)."""
        for role, func in (("desc", desc), ("impl", impl)):
            if not isinstance(func, PrimFunc):
                raise ScheduleError(f"TensorIntrin {name!r}: {role} is a "
                                    f"{type(func).__name__}, not a prim func", key=name)
        if len(desc.params) != len(impl.params):
            raise ScheduleError(f"TensorIntrin {name!r}: desc takes {len(desc.params)} "
                                f"parameters, impl {len(impl.params)}", key=name)
        if name in _REGISTRY and not override:
            raise ScheduleError(f"TensorIntrin {name!r} is already registered", key=name,
                                hint="pass override=True to replace it")
        _REGISTRY[name] = TensorIntrin(desc, impl)

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> TensorIntrin | None:
        """The intrinsic registered as ``name`` (None when missing and ``allow_missing``)."""
        found = _REGISTRY.get(name)
        if found is None and not allow_missing:
            if name in _FOREIGN:
                raise TensorIntrinNotFound(
                    f"TensorIntrin {name!r} is a {_FOREIGN[name]} intrinsic: msc compiles for "
                    "x86 CPUs only and does not provide it", key=name,
                    hint=f"on x86 use one of {sorted(_REGISTRY) or 'none'}")
            raise TensorIntrinNotFound(f"no TensorIntrin {name!r} is registered", key=name,
                                       hint=f"registered: {sorted(_REGISTRY) or 'none'}")
        return found
