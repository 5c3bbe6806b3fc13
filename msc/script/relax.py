"""The ``R`` namespace of msc's TVMScript.

``@R.function`` parses a Python function from its source into an msc ``relax.Function`` (inside
an ``@I.ir_module`` class the module decorator does the parsing). ``R.<op>`` / ``R.nn.<op>``
resolve through the op table, so ``R.add(x, y)`` also works eagerly as ``relax.op.add``.
Annotations (``R.Tensor((1, 3), dtype="float32")``) are evaluated by Python at definition
time but only read by the parser, so they return inert placeholders::

    @R.function
    def main(x: R.Tensor((1, 4), dtype="float32")) -> R.Tensor((1, 4), dtype="float32"):
        gv = R.nn.relu(x)
        return gv
"""

from __future__ import annotations

import inspect

from ..relax import expr as _expr
from ..relax.op import registry as _registry

__all__ = [
    "Any",
    "Callable",
    "Object",
    "Prim",
    "Shape",
    "Tensor",
    "Tuple",
    "const",
    "dataflow",
    "dtype",
    "func_attr",
    "function",
    "match_cast",
    "output",
    "prim_value",
    "shape",
    "str",
    "tuple",
]

_builtin_str = str


class _Annotation:
    """What ``R.Tensor(...)`` & co. return when Python evaluates an annotation."""

    def __init__(self, name: _builtin_str, args=(), kwargs=None):
        self._name, self._args, self._kwargs = name, args, kwargs or {}

    def __call__(self, *args, **kwargs):
        return _Annotation(self._name, args, kwargs)

    def __repr__(self) -> _builtin_str:
        parts = [repr(a) for a in self._args] + [f"{k}={v!r}" for k, v in self._kwargs.items()]
        return f"R.{self._name}({', '.join(parts)})" if parts or self._args else \
            f"R.{self._name}"


Tensor = _Annotation("Tensor")
Tuple = _Annotation("Tuple")
Shape = _Annotation("Shape")
Prim = _Annotation("Prim")
Object = _Annotation("Object")
Any = _Annotation("Any")
Callable = _Annotation("Callable")


def function(func=None, *, pure: bool = True, private: bool = False, **_kwargs):
    """``@R.function`` / ``@R.function(pure=False, private=True)``.

    A method of a class (to be wrapped by ``@I.ir_module``) is returned unchanged; a
    free-standing function is parsed into an msc ``relax.Function``."""
    if func is None:
        return lambda f: function(f, pure=pure, private=private)
    qual = func.__qualname__.split(".")
    if len(qual) > 1 and qual[-2] != "<locals>":
        return func  # a method: the module decorator parses the whole class
    from ..relax.parser import parse_object

    frame = inspect.currentframe().f_back
    return parse_object(func, dict(frame.f_locals) if frame is not None else None)


# Eager helpers: the same values the parser builds for these forms.
const = _expr.const
prim_value = _expr.prim_value


def shape(values) -> _expr.ShapeExpr:
    return _expr.ShapeExpr(values)


def str(value) -> _expr.StringImm:
    return _expr.StringImm(value)


def dtype(value) -> _expr.DataTypeImm:
    return _expr.DataTypeImm(value)


def tuple(*fields) -> _expr.Tuple:
    return _expr.Tuple(fields)


def _statement_only(name: _builtin_str):
    def fail(*_args, **_kwargs):
        raise RuntimeError(f"R.{name}(...) only has meaning inside a parsed @R.function body")

    fail.__name__ = name
    return fail


dataflow = _statement_only("dataflow")
output = _statement_only("output")
func_attr = _statement_only("func_attr")
match_cast = _statement_only("match_cast")


class _OpNamespace:
    """``R.nn`` / ``R.image``: op builders under a prefix, read from the op table."""

    def __init__(self, prefix: _builtin_str):
        self._prefix = prefix

    def __getattr__(self, name: _builtin_str):
        return _lookup(f"{self._prefix}.{name}")

    def __repr__(self) -> _builtin_str:
        return f"R.{self._prefix}"


def _lookup(name: _builtin_str):
    if name in _registry.OPS:
        return _registry.make_function(_registry.OPS[name])
    if any(op.startswith(name + ".") for op in _registry.OPS):
        return _OpNamespace(name)
    raise AttributeError(f"R.{name} is not an op in the op table "
                         f"(see msc.relax.op.registry.OPS)")


def __getattr__(name: _builtin_str):
    if name.startswith("__"):
        raise AttributeError(name)
    return _lookup(name)
