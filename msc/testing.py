"""Test helpers under TVM's names (``tvm.testing``, ``tvm.s_tir.schedule.testing``).

Structural equality compares the two functions as msc prints them, with every binding
(buffers, loop and block vars, parameters) renamed to the next canonical name and each use
to its latest binding, so two functions that differ only in how their variables are spelled
(or in whether sibling loop nests reuse a name) are equal, as under TVM's ``structural_equal``; shapes, dtypes, annotations and expressions must match. Block names
are not compared (neither does TVM), nor blocks' ``T.reads`` / ``T.writes`` (TVM infers them
where msc keeps only stated ones)::

    from msc import testing
    testing.assert_structural_equal(sch.mod["main"], expected)
    testing.verify_trace_roundtrip(sch, mod)     # replaying sch.trace gives the same module
"""

from __future__ import annotations

import ast

import numpy as np

from .errors import ValidationError

__all__ = ["assert_allclose", "assert_structural_equal",
           "assert_structural_equal_ignore_global_symbol", "main", "parameter",
           "parameters", "requires_cuda", "requires_gpu", "structural_text",
           "verify_trace_roundtrip"]

_KEEP = frozenset({"T", "I", "R", "True", "False", "None"})


def structural_text(obj, keep_global_symbol: bool = True) -> str:
    """``obj`` (a PrimFunc or IRModule) printed with bound names canonicalized: the text
    :func:`assert_structural_equal` compares."""
    funcs = _functions(obj)
    parts = []
    for key in sorted(funcs) if len(funcs) > 1 else funcs:
        func = funcs[key]
        if not keep_global_symbol and hasattr(func, "attrs"):
            func = _without(func, "global_symbol")
        elif hasattr(func, "attrs") and not getattr(func, "private", True) and \
                "global_symbol" not in func.attrs:
            func = _with_symbol(func)  # TVM's parser gives a public prim func its name
        parts.append(_canonical(func.script(name="f")))
    return "\n".join(parts)


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` with both texts when ``lhs`` and ``rhs`` differ structurally."""
    _compare(structural_text(lhs), structural_text(rhs), lhs, rhs)


def assert_structural_equal_ignore_global_symbol(lhs, rhs, map_free_vars: bool = False):
    """:func:`assert_structural_equal`, ignoring the functions' ``global_symbol`` attrs."""
    _compare(structural_text(lhs, False), structural_text(rhs, False), lhs, rhs)


def verify_trace_roundtrip(sch, mod, *, debug_mask="all", text_format=("python", "json")):
    """Replay ``sch.trace`` (and its JSON form) on a fresh schedule of ``mod``; each result
    must be structurally equal to ``sch.mod``. Returns the replayed schedule."""
    from .s_tir.schedule import Schedule, Trace

    formats = (text_format,) if isinstance(text_format, str) else tuple(text_format)
    replayed = None
    for fmt in formats:
        trace = sch.trace if fmt == "python" else Trace.from_json(sch.trace.as_json())
        replayed = Schedule(mod)
        trace.apply_to_schedule(replayed)
        assert_structural_equal(sch.mod, replayed.mod)
    return replayed


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` on arrays or msc NDArrays."""
    np.testing.assert_allclose(_numpy(actual), _numpy(desired), rtol=rtol, atol=atol)


def parameter(*values, ids=None, by_dict=None):
    """A pytest fixture taking each of ``values`` (TVM's ``tvm.testing.parameter``);
    ``by_dict={id: value}`` names each value."""
    import pytest

    if by_dict is not None:
        ids, values = list(by_dict), tuple(by_dict.values())

    @pytest.fixture(params=values, ids=ids)
    def fixture(request):
        return request.param

    return fixture


def parameters(*value_sets, ids=None):
    """One fixture per position of ``value_sets`` tuples, varied together."""
    return [parameter(*[v[i] for v in value_sets], ids=ids) for i in range(len(value_sets[0]))]


def _gpu_skip(func=None, *args, **kwargs):
    import pytest

    mark = pytest.mark.skip(reason="gpu: msc has no GPU target")
    return mark(func) if callable(func) else mark


requires_cuda = requires_gpu = requires_rocm = requires_cuda_compute_version = _gpu_skip


def main() -> None:
    """Run the calling test file under pytest (``tvm.testing.main()``)."""
    import sys

    import pytest

    sys.exit(pytest.main([sys.argv[0], *sys.argv[1:]]))


def _compare(a: str, b: str, lhs, rhs) -> None:
    if a != b:
        raise ValueError("StructuralEqual check failed:\n--- lhs\n" + _script(lhs)
                         + "\n--- rhs\n" + _script(rhs))


def _script(obj) -> str:
    return "\n".join(f.script() for f in _functions(obj).values())


def _functions(obj) -> dict:
    from .tir.function import PrimFunc, Stmt

    if hasattr(obj, "functions"):
        return dict(obj.functions)
    if hasattr(obj, "script") and hasattr(obj, "body"):
        return {"main": obj}
    if isinstance(obj, Stmt):  # a block or loop (TVM compares statements too): as a body
        return {"main": PrimFunc((), obj, private=True)}
    raise ValidationError(f"structural equality compares PrimFuncs, IRModules and statements, "
                          f"not {type(obj).__name__}", hint="pass sch.mod or sch.mod['main']")


def _with_symbol(func):
    from dataclasses import replace

    return replace(func, attrs={**func.attrs, "global_symbol": func.name})


def _without(func, key: str):
    from dataclasses import replace

    return replace(func, attrs={k: v for k, v in func.attrs.items() if k != key})


def _canonical(text: str) -> str:
    tree = _RegionDropper().visit(ast.parse(text))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.name = "f"
    _Binder().visit(tree)
    return ast.unparse(tree)


class _Binder(ast.NodeVisitor):
    """Alpha-renaming: every binding (a parameter, a ``for`` target, an assigned name) gets
    the next canonical name, and each use takes the name's latest binding, so two nests
    that both say ``for i, j`` compare equal to two that say ``for i, j`` and ``for ax0,
    ax1`` (TVM's structural equality binds vars, it does not compare their names). A value
    is visited before its targets, a loop's range before its var."""

    def __init__(self):
        self.names: dict = {}
        self.count = 0

    def _bind(self, name: str) -> str:
        if name in _KEEP:
            return name
        self.names[name] = f"v{self.count}"
        self.count += 1
        return self.names[name]

    def visit_arg(self, node):
        if node.annotation is not None:
            self.visit(node.annotation)
        node.arg = self._bind(node.arg)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            node.id = self._bind(node.id)
        elif node.id not in _KEEP:
            if node.id not in self.names:
                self._bind(node.id)
            node.id = self.names[node.id]

    def visit_Assign(self, node):
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_For(self, node):
        self.visit(node.iter)
        self.visit(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)


class _RegionDropper(ast.NodeTransformer):
    """Drop ``T.reads`` / ``T.writes``: TVM infers a block's regions when the script does not
    state them, msc keeps only stated ones, so the two sides would differ in what is stated
    rather than in what the block does. The regions follow from the body, which is compared.
    Block names are blanked: TVM's structural equality ignores a block's ``name_hint``."""

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) in ("T.reads", "T.writes"):
            return None
        return self.generic_visit(node)

    def visit_Call(self, node):
        if ast.unparse(node.func) in ("T.sblock", "T.block") and node.args:
            node.args = [ast.Constant("")]
        return self.generic_visit(node)


def _numpy(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)
