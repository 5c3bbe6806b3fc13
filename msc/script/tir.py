"""The ``T`` namespace of msc's TVMScript: symbolic scalars and the TIR decorators.

``T.int64(5)`` is a constant, ``T.int64()`` declares a symbolic size var (its name is the
variable it is assigned to), ``T.min`` / ``T.max`` / ``T.floordiv`` / ``T.Cast`` build
symbolic expressions. The Relax parser evaluates ``T.<name>(...)`` through :data:`PRIM_FUNCS`
and :func:`dtype_ctor`; nothing here runs user text::

    from msc.script import tir as T
    T.min(T.int64(4), 2)            # 2
    T.Cast("int32", n)              # a tir.Cast
"""

from __future__ import annotations

from functools import partial

from ..errors import ValidationError
from ..tir import expr as tir
from ..tir import intrin

__all__ = ["PRIM_FUNCS", "Buffer", "SymbolicVarDecl", "dtype_ctor", "prim_func"]


class SymbolicVarDecl:
    """What ``T.int64()`` returns: a declaration that the parser binds to a name."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"T.{self.dtype}()"


def dtype_ctor(dtype: str):
    """``T.<dtype>``: ``T.int64(3)`` -> IntImm, ``T.float32(x)`` -> FloatImm or Cast."""

    def ctor(value=None):
        if value is None:
            return SymbolicVarDecl(dtype)
        if isinstance(value, tir.PrimExpr) and not value.is_const:
            return value if value.dtype == dtype else tir.Cast(dtype, value)
        number = value.value if isinstance(value, tir.PrimExpr) else value
        if dtype.startswith(("float", "bfloat")):
            return tir.FloatImm(float(number), dtype)
        if dtype == "bool":
            return tir.IntImm(int(bool(number)), "bool")
        if isinstance(number, float) and not number.is_integer():
            raise ValidationError(f"T.{dtype}({number!r}) needs an integer")
        return tir.IntImm(int(number), dtype)

    ctor.__name__ = dtype
    ctor.__qualname__ = dtype
    return ctor


def _cast(dtype, value):
    return dtype_ctor(str(dtype))(value)


def _math(name: str, *args):
    args = [tir.convert(a) for a in args]
    return tir.PrimCall(name, args, intrin.call_dtype(name, args))


PRIM_FUNCS = {name: partial(tir.binary, kind) for name, kind in intrin.BINARY_FUNCS.items()}
PRIM_FUNCS.update({
    "Cast": _cast,
    "Select": tir.if_then_else,
    "if_then_else": tir.if_then_else,
    "ceildiv": tir.ceildiv,
})
PRIM_FUNCS.update({name: partial(_math, name)
                   for name in intrin.MATH_UNARY | intrin.MATH_BINARY | intrin.PREDICATES})


class _Inert:
    """A TIR structural name used in Python annotations or decorators (``T.Buffer((4,),
    "float32")``, ``T.Buffer[(4,), "float32"]``): evaluated by Python, never interpreted."""

    def __init__(self, name: str, args=(), kwargs=None):
        self._name, self._args, self._kwargs = name, args, kwargs or {}

    def __call__(self, *args, **kwargs):
        return _Inert(self._name, args, kwargs)

    def __getitem__(self, item):
        return _Inert(self._name, (item,))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(f"{self._name}.{name}")

    def __repr__(self) -> str:
        return f"T.{self._name}"


Buffer = _Inert("Buffer")


def prim_func(func=None, **kwargs):
    """``@T.prim_func`` / ``@T.prim_func(private=True, s_tir=True)``: inside a class, the
    function is read from its source by the enclosing ``@I.ir_module`` and returned
    unchanged; a top-level function becomes a ``PrimFunc`` parsed from its source (with
    ``ast``, as TVM does), or stays as it is when Python has no source for it."""
    if func is None:
        return prim_func
    if not callable(func) or _in_class(getattr(func, "__qualname__", "")):
        return func
    import sys

    caller = sys._getframe(1)  # the scope the function is defined in (annotations' names)
    return _parsed(func, dict(caller.f_locals))


def _in_class(qualname: str) -> bool:
    """``Module.main`` is a class member; ``test_x.<locals>.func`` is a function's local."""
    outer = qualname.rpartition(".")[0]
    return bool(outer) and not outer.endswith("<locals>")


def _parsed(func, caller_locals: dict | None = None):
    import ast
    import inspect
    import textwrap

    from ..tir.parser import parse_prim_func

    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):  # defined in exec'd text or a REPL: nothing to read
        return func
    tree = ast.parse(source)
    return parse_prim_func(tree.body[0], source,
                           py_env=_python_names(func, caller_locals or {}))


def _python_names(func, caller_locals: dict) -> dict:
    """The names ``func`` sees, as TVM's parser reads them: its globals, the locals of the
    scope it is defined in (what its annotations name), and its closure."""
    import inspect

    try:
        closure = inspect.getclosurevars(func).nonlocals
    except (TypeError, ValueError):
        closure = {}
    return {**getattr(func, "__globals__", {}), **caller_locals, **closure}


def __getattr__(name: str):
    if name in intrin.DTYPES:
        return dtype_ctor(name)
    if name in PRIM_FUNCS:
        return PRIM_FUNCS[name]
    if name in intrin.TIR_NAMES:
        return _Inert(name)
    raise AttributeError(f"msc.script.tir has no name {name!r}")
