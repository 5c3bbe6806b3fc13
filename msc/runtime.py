"""``tvm.runtime`` / ``tvm.compile`` for msc: what TVM's tests use to run a scheduled prim
func on the host.

    import msc as tvm
    lib = tvm.compile(sch.mod["main"], target="llvm")   # TVM: tvm.compile(func, "llvm")
    a, out = tvm.runtime.tensor(a_np), tvm.runtime.tensor(np.zeros(...))
    lib(a, out)                                          # the module's entry function
    out.numpy()

``compile`` of prim funcs is ``msc.build`` (llvmlite kernels) with TVM's callable
executable: calling it runs the entry function (``main``, or the only one); a module with
Relax functions goes to ``relax.build``.
"""

from __future__ import annotations

from . import nd
from .errors import ValidationError

__all__ = ["Executable", "compile", "empty", "tensor"]


def tensor(data, device=None) -> nd.NDArray:
    """``tvm.runtime.tensor(np_array)``: a host array a compiled function reads or writes."""
    return nd.array(data, device)


def empty(shape, dtype: str = "float32", device=None) -> nd.NDArray:
    return nd.empty(shape, dtype, device)


class Executable:
    """A built module whose call runs its entry function (TVM's ``tvm.compile`` result)."""

    def __init__(self, module):
        self.module = module

    def __call__(self, *args):
        return self.module[self.entry_name](*args)

    def __getitem__(self, name: str):
        return self.module[name]

    @property
    def entry_name(self) -> str:
        return "main" if "main" in self.module else self.module.entry_name

    def time_evaluator(self, func_name: str, *args, **kwargs):
        return self.module.time_evaluator(func_name, *args, **kwargs)


def compile(mod, target="llvm", **kwargs):
    """Build ``mod`` (a PrimFunc, or an IRModule of prim funcs or Relax functions)."""
    from . import build
    from .tir.function import PrimFunc

    funcs = [] if isinstance(mod, PrimFunc) else [mod[gv] for gv in mod.get_global_vars()] \
        if hasattr(mod, "get_global_vars") else None
    if funcs is None:
        raise ValidationError(f"tvm.compile takes a PrimFunc or an IRModule, got "
                              f"{type(mod).__name__}")
    if any(not isinstance(f, PrimFunc) for f in funcs):
        from .relax import build as relax_build

        return relax_build(mod, target, **kwargs)
    return Executable(build(mod, target))
