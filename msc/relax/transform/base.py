"""Pass infrastructure: ModulePass, FunctionPass, Sequential, PassContext (TVM's call style).

    mod = relax.transform.FoldConstant()(mod)
    seq = relax.transform.Sequential([BindParams("main", params), FoldConstant()])
    with relax.transform.PassContext(opt_level=3):
        mod = seq(mod)
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ValidationError
from ..expr import Function
from ..module import IRModule

__all__ = ["FunctionPass", "ModulePass", "PassContext", "Sequential", "module_pass"]


_STACK: list = []  # the PassContexts entered, innermost last


class PassContext:
    """Options for the passes run inside ``with PassContext(...)``.

    A Sequential skips passes whose ``opt_level`` is above the context's, unless they are in
    ``required_pass``; passes named in ``disabled_pass`` never run.
    """

    def __init__(self, opt_level: int = 2, required_pass=(), disabled_pass=(), config=None):
        self.opt_level = opt_level
        self.required_pass = set(required_pass)
        self.disabled_pass = set(disabled_pass)
        self.config = dict(config or {})

    @classmethod
    def current(cls) -> PassContext:
        return _STACK[-1] if _STACK else _DEFAULT_CONTEXT

    def __enter__(self):
        _STACK.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _STACK.pop()

    def allows(self, p: ModulePass) -> bool:
        if p.name in self.disabled_pass:
            return False
        return p.opt_level <= self.opt_level or p.name in self.required_pass


_DEFAULT_CONTEXT = PassContext()


class ModulePass:
    """A module -> module transformation; subclasses implement ``transform_module``.
    Passes never modify their input module: they return a new one."""

    opt_level = 0
    name: str | None = None

    def __init__(self):
        if self.name is None:
            self.name = type(self).__name__

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise ValidationError(f"{self.name} runs on an IRModule, got {type(mod).__name__}",
                                  hint="wrap a function with IRModule({'main': func})")
        return self.transform_module(mod, PassContext.current())

    def __repr__(self) -> str:
        return f"{self.name}(opt_level={self.opt_level})"


class FunctionPass(ModulePass):
    """Applies ``transform_function`` to every Relax function of the module."""

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        raise NotImplementedError

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                new = self.transform_function(func, mod, ctx)
                if new is not func:
                    out[gv] = new
        return out


class Sequential(ModulePass):
    """Runs passes in order, honouring the current PassContext."""

    def __init__(self, passes, opt_level: int = 0, name: str = "sequential"):
        self.passes = list(passes)
        self.opt_level = opt_level
        self.name = name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if ctx.allows(p):
                mod = p(mod)
        return mod


class _FunctionModulePass(ModulePass):
    def __init__(self, fn: Callable, opt_level: int, name: str):
        self.fn = fn
        self.opt_level = opt_level
        self.name = name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fn(mod, ctx)


def module_pass(fn: Callable | None = None, *, opt_level: int = 0, name: str | None = None):
    """Make a pass from ``fn(mod, ctx) -> mod`` (TVM's ``tvm.transform.module_pass``)::

        @module_pass(opt_level=1)
        def drop_attrs(mod, ctx):
            return IRModule(mod.functions)
    """
    def wrap(f: Callable) -> ModulePass:
        return _FunctionModulePass(f, opt_level, name or f.__name__)

    return wrap(fn) if fn is not None else wrap
