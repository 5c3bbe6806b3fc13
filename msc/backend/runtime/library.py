"""``tvm.build`` for prim funcs: a runtime module of compiled TIR kernels, called by name.

    import msc as tvm
    rt_lib = tvm.build(MyModule, target="llvm")          # every T.prim_func of the module
    rt_lib["mm_relu"](a_nd, b_nd, c_nd)                  # destination passing: c_nd is written
    timer = rt_lib.time_evaluator("mm_relu", tvm.cpu())
    print(timer(a_nd, b_nd, c_nd).mean)                  # seconds per call

Relax functions are built by ``relax.build`` (``relax.vm.build``) instead; ``tvm.build`` of a
module that has only Relax functions says so.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import BuildError, ValidationError
from ...tir.function import PrimFunc
from .arrays import NDArray, to_numpy
from .timing import BenchmarkResult, time_calls

__all__ = ["Module", "build"]

_TARGETS = ("llvm", "c")


def build(mod, target="llvm", *, name: str | None = None) -> Module:
    """Compile every prim func of ``mod`` (an IRModule or a PrimFunc) for the host CPU."""
    kind = str(getattr(target, "kind", target) or "llvm").split()[0]
    if kind not in _TARGETS:
        raise BuildError(f"tvm.build: target {target!r} is not available", op="build",
                         hint="msc compiles for the host CPU: target='llvm'")
    funcs = _prim_funcs(mod, name)
    from ..lowering.compile import compile_prim_func

    return Module({fname: compile_prim_func(func) for fname, func in funcs.items()})


def _prim_funcs(mod, name: str | None) -> dict:
    if isinstance(mod, PrimFunc):
        return {name or _symbol(mod, "main"): mod}
    funcs = {gv.name_hint: mod[gv] for gv in mod.get_global_vars()}
    prims = {_symbol(f, n): f for n, f in funcs.items() if isinstance(f, PrimFunc)}
    if not prims:
        raise BuildError("tvm.build compiles T.prim_func functions; this module has none",
                         op="build", hint="build Relax functions with relax.build(mod, 'llvm') "
                         "(TVM: relax.vm.build) and run them on relax.VirtualMachine")
    return prims


def _symbol(func: PrimFunc, default: str) -> str:
    return str(func.attrs.get("global_symbol", default))


class Module:
    """Compiled prim funcs by name (TVM's ``runtime.Module`` of ``tvm.build``)."""

    def __init__(self, kernels: dict):
        self._kernels = dict(kernels)

    def __getitem__(self, name: str) -> Callable:
        return self.get_function(name)

    def __contains__(self, name: str) -> bool:
        return name in self._kernels

    def get_function(self, name: str) -> Callable:
        if name not in self._kernels:
            raise ValidationError(f"the built module has no function {name!r}", key=name,
                                  hint=f"functions: {sorted(self._kernels)}")
        kernel = self._kernels[name]
        return lambda *args: kernel(*(_array(a) for a in args))

    @property
    def entry_name(self) -> str:
        return next(iter(self._kernels))

    def time_evaluator(self, func_name: str, dev=None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: int = 0, **_ignored) -> Callable:
        """A timer of ``func_name``: called with its arguments, it returns a
        :class:`BenchmarkResult` of seconds per call (TVM's ``time_evaluator``)."""
        fn = self.get_function(func_name)

        def evaluate(*args) -> BenchmarkResult:
            arrays = [_array(a) for a in args]
            return BenchmarkResult(time_calls(lambda: fn(*arrays), number, repeat,
                                              min_repeat_ms))

        return evaluate

    def __repr__(self) -> str:
        return f"Module({sorted(self._kernels)})"


def _array(value):
    """NDArrays and tensors as the numpy arrays they wrap (no copy: outputs are written)."""
    if isinstance(value, NDArray) or hasattr(value, "__dlpack__"):
        return to_numpy(value, contiguous=False)
    return value
