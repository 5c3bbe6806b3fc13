"""TIR prim functions: buffers, the few PrimExprs that need them, and a small statement IR.

A :class:`PrimFunc` is what ``R.call_tir`` calls: buffer (or scalar) params and a statement body.
Nodes are frozen dataclasses; transforms build new ones. Scoping follows TVM 0.27's printed
form: :class:`LetStmt` and :class:`AllocBuffer` bind for the rest of the enclosing
:class:`SeqStmt`, and an s_tir function's body is a root :class:`SBlock`::

    x = Buffer("x", (IntImm(2), IntImm(3)))
    y = Buffer("y", (IntImm(2), IntImm(3)))
    i = Var("i")
    body = For(i, IntImm(0), IntImm(2), "serial",
               BufferStore(y, BufferLoad(x, (i, IntImm(0))), (i, IntImm(0))))
    func = PrimFunc((x, y), body, name="copy_col")
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import ValidationError
from .expr import BinaryOp, IntImm, PrimExpr, Var

__all__ = [
    "FOR_KINDS",
    "ITER_KINDS",
    "AllocBuffer",
    "AttrStmt",
    "Block",
    "Buffer",
    "BufferLoad",
    "BufferRegion",
    "BufferStore",
    "Evaluate",
    "For",
    "ForKind",
    "IfThenElse",
    "IterVar",
    "LetStmt",
    "PrimFunc",
    "SBlock",
    "SBlockRealize",
    "SeqStmt",
    "Stmt",
    "StringImm",
    "While",
    "install_printer",
    "range_extent",
    "range_stop",
    "seq",
    "walk_stmts",
]

# PrimFunc.script prints through msc.tir.printer, which imports this module; the package
# (msc/tir/__init__.py) installs the printer here once, so the two do not import each other.
_PRINTER: list = []


def install_printer(prim_func_to_script) -> None:
    """Called once by msc/tir/__init__.py: ``(func, name) -> TVMScript text``."""
    _PRINTER[:] = [prim_func_to_script]

FOR_KINDS = ("serial", "parallel", "vectorized", "unroll", "thread_binding")
# Block iter var kinds -> the letter T.axis.remap uses (None: no remap letter).
ITER_KINDS = {"spatial": "S", "reduce": "R", "scan": None, "opaque": None}


@dataclass(frozen=True)
class Buffer:
    """A named n-d array view: ``T.Buffer((n, 4), "float32")``."""

    name: str
    shape: tuple
    dtype: str = "float32"
    strides: tuple | None = None
    elem_offset: PrimExpr | None = None
    scope: str = "global"

    def __post_init__(self):
        if not self.name:
            raise ValidationError("a TIR buffer needs a name")
        object.__setattr__(self, "shape", tuple(self.shape))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(self.strides))
        if isinstance(self.elem_offset, IntImm) and self.elem_offset.value == 0:
            # TVM's default offset is 0: a stated ``elem_offset=0`` is the same buffer
            object.__setattr__(self, "elem_offset", None)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> BufferLoad:
        return BufferLoad(self, indices if isinstance(indices, tuple) else (indices,))


class StringImm(PrimExpr):
    """A string argument of an intrinsic call (``T.call_extern("int32", "f", x)``)."""

    __slots__ = ("value",)
    kind = "StringImm"

    def __init__(self, value: str):
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "dtype", "handle")
        object.__setattr__(self, "_key", ("Str", value))


class BufferLoad(PrimExpr):
    """``buf[i, j]`` as a scalar expression."""

    __slots__ = ("buffer", "indices")
    kind = "BufferLoad"

    def __init__(self, buffer: Buffer, indices):
        indices = tuple(indices)
        if len(indices) != buffer.ndim:
            raise ValidationError(f"buffer {buffer.name!r} has {buffer.ndim} dims, indexed with "
                                  f"{len(indices)}")
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "dtype", buffer.dtype)
        object.__setattr__(self, "_key", ("Load", buffer.name, tuple(i._key for i in indices)))


def expr_children(e: PrimExpr) -> tuple:
    """Sub-expressions of ``e`` including buffer indices (extends ``expr.children``)."""
    from .expr import children

    if isinstance(e, BufferLoad):
        return e.indices
    return children(e)


@dataclass(frozen=True)
class BufferRegion:
    """A buffer access in ``T.reads``/``T.writes``: per dim a point ``(i, None)`` or a slice
    ``(start, stop)``."""

    buffer: Buffer
    region: tuple


class Stmt:
    """Base of TIR statements."""

    def same_as(self, other) -> bool:
        """TVM's reference equality: the same statement object (``sch.get(rv)`` of one block
        twice gives the same object while the function does not change)."""
        return self is other

    def __setstate__(self, state: dict) -> None:
        """TVM's deep copy (``s.__setstate__(s.__getstate__())``): this statement takes fresh
        copies of the statements it holds, so it shares no node with where they came from."""
        for key, value in state.items():
            object.__setattr__(self, key, _fresh(value))


def _fresh(value):
    """``value`` with every statement in it rebuilt as a new object (expressions are shared:
    they are values)."""
    if isinstance(value, Stmt):
        copy = object.__new__(type(value))
        copy.__setstate__(dict(vars(value)))
        return copy
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    return value


@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple


@dataclass(frozen=True)
class Evaluate(Stmt):
    """An expression run for its side effect (``T.call_extern(...)``, ``T.evaluate(0)``)."""

    value: PrimExpr

    def __post_init__(self):
        if isinstance(self.value, int):  # TVM's Evaluate(0)
            object.__setattr__(self, "value", IntImm(int(self.value), "int32"))


@dataclass(frozen=True)
class SeqStmt(Stmt):
    stmts: tuple

    def __getitem__(self, index):  # TVM's seq[k]
        return self.stmts[index]

    def __len__(self) -> int:
        return len(self.stmts)


class ForKind:
    """TVM's ``tirx.ForKind``: the loop kinds, spelled as msc stores them."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    THREAD_BINDING = "thread_binding"


@dataclass(frozen=True, init=False)
class For(Stmt):
    """``for var in range(min, min + extent)`` of a kind in FOR_KINDS. Also built with TVM's
    keywords: ``For(loop_var=i, min=0, extent=16, kind=ForKind.SERIAL, body=...,
    thread_binding=None, annotations=None)`` (int bounds take the loop var's dtype)."""

    var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    annotations: dict = field(default_factory=dict)
    thread: str | None = None

    def __init__(self, var=None, min=None, extent=None, kind="serial", body=None,
                 annotations=None, thread=None, *, loop_var=None, thread_binding=None):
        var = var if var is not None else loop_var
        fields = {"var": var, "min": _index(min, var), "extent": _index(extent, var),
                  "kind": kind, "body": body, "annotations": dict(annotations or {}),
                  "thread": thread if thread is not None else thread_binding}
        for key, value in fields.items():
            object.__setattr__(self, key, value)
        if self.kind not in FOR_KINDS:
            raise ValidationError(f"unknown loop kind {self.kind!r}",
                                  hint=f"use one of {', '.join(FOR_KINDS)}")

    @property
    def loop_var(self) -> Var:
        """TVM's name for :attr:`var`."""
        return self.var


@dataclass(frozen=True)
class While(Stmt):
    cond: PrimExpr
    body: Stmt


@dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True)
class LetStmt(Stmt):
    """``var: T.int32 = value``; binds for the rest of the enclosing sequence. ``let_expr``
    marks TVM's inlined Let expressions, printed as ``var: T.let[T.int32] = value``."""

    var: Var
    value: PrimExpr
    let_expr: bool = False


@dataclass(frozen=True)
class AllocBuffer(Stmt):
    """``buf = T.alloc_buffer(shape, dtype)`` outside blocks; lives for the rest of the
    enclosing sequence."""

    buffer: Buffer


@dataclass(frozen=True)
class AttrStmt(Stmt):
    """``T.attr({"pragma_scope": "seq"})``: hints for the rest of the enclosing sequence
    (codegen pragmas; no effect on values)."""

    attrs: dict


@dataclass(frozen=True)
class IterVar:
    """A block axis: ``var = T.axis.<kind>((min, min + extent) or extent, binding)``."""

    var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    binding: PrimExpr


@dataclass(frozen=True, init=False)
class SBlock(Stmt):
    """``with T.sblock(name):`` (``T.block`` before TVM 0.27). ``reads``/``writes`` are None
    when the source did not state them; ``init`` runs when every reduce axis is at its min.
    TVM's keywords build one too: ``SBlock(iter_vars=[], reads=[], writes=[],
    name_hint="b", body=..., init=None, alloc_buffers=None, match_buffers=None,
    annotations=None)``."""

    name: str
    body: Stmt
    iter_vars: tuple = ()
    reads: tuple | None = None
    writes: tuple | None = None
    init: Stmt | None = None
    alloc_buffers: tuple = ()
    annotations: dict = field(default_factory=dict)
    predicate: PrimExpr | None = None
    # ``X = T.match_buffer(B[vi, 0:4], (4,))`` inside the block: (X, the BufferRegion of B)
    match_buffers: tuple = ()

    def __init__(self, name=None, body=None, iter_vars=(), reads=None, writes=None, init=None,
                 alloc_buffers=(), annotations=None, predicate=None, match_buffers=(), *,
                 name_hint=None):
        fields = {"name": name if name is not None else name_hint, "body": body,
                  "iter_vars": tuple(iter_vars or ()),
                  "reads": None if reads is None else tuple(reads),
                  "writes": None if writes is None else tuple(writes), "init": init,
                  "alloc_buffers": tuple(alloc_buffers or ()),
                  "annotations": dict(annotations or {}), "predicate": predicate,
                  "match_buffers": tuple(match_buffers or ())}
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    @property
    def name_hint(self) -> str:
        """TVM's name for :attr:`name`."""
        return self.name

    @property
    def block(self) -> SBlock:
        """TVM's ``SBlockRealize.block``: msc keeps the realize's bindings and predicate on
        the block itself, so ``func.body.block`` is the root block (the same node)."""
        return self

    @property
    def is_implicit_root(self) -> bool:
        """The root block TVM prints as a comment (``# with T.sblock("root"):``)."""
        return (self.name == "root" and not self.iter_vars and self.init is None
                and not self.annotations and self.predicate is None
                and not (self.reads or self.writes))


Block = SBlock


def SBlockRealize(iter_values=(), predicate=True, block=None) -> SBlock:
    """TVM's ``SBlockRealize(iter_values, predicate, block)``. msc keeps a realize's bindings
    and predicate on the block itself, so this is ``block`` with them set."""
    values = tuple(iter_values or ())
    if len(values) != len(block.iter_vars):
        raise ValidationError(f"block {block.name!r} has {len(block.iter_vars)} iter vars, "
                              f"realized with {len(values)} values")
    ivs = tuple(replace(iv, binding=v) for iv, v in zip(block.iter_vars, values))
    pred = None if predicate is True or (isinstance(predicate, IntImm) and predicate.value) \
        else predicate
    return replace(block, iter_vars=ivs, predicate=pred)


def _index(value, var):
    """A loop bound given as a Python int takes the loop var's dtype (TVM's ``For``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return IntImm(value, var.dtype if var is not None else "int32")
    return value


@dataclass(frozen=True, eq=True)
class PrimFunc:
    """A TIR function: ``params`` are Buffers (tensors) or Vars (scalars, handles)."""

    params: tuple
    body: Stmt
    attrs: dict = field(default_factory=dict)
    name: str = "main"
    private: bool = False
    s_tir: bool = False
    sym_vars: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "sym_vars", tuple(self.sym_vars))

    def same_as(self, other) -> bool:
        """TVM's reference equality: the same function object."""
        return self is other

    def __hash__(self) -> int:
        cached = self.__dict__.get("_text_hash")
        if cached is None:
            cached = hash((self.name, self.script()))
            object.__setattr__(self, "_text_hash", cached)
        return cached

    @property
    def buffers(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    def signature_vars(self) -> list[Var]:
        """Symbolic vars that appear as whole dims of param buffers, in first-use order."""
        found: dict = {}
        for buf in self.buffers:
            for dim in buf.shape:
                if isinstance(dim, Var):
                    found.setdefault(dim.name, dim)
        return list(found.values())

    def module_vars(self) -> list[Var]:
        """int64 signature vars: TVM 0.27 declares these at module level
        (``n = TypeVar("n")``) rather than inside the function."""
        return [v for v in self.signature_vars() if v.dtype == "int64"]

    def script(self, name: str | None = None) -> str:
        return _PRINTER[0](self, name or self.name)

    def with_attr(self, key: str | dict, value=None) -> PrimFunc:
        """A copy with ``attrs[key] = value`` (TVM's ``func.with_attr("global_symbol", ...)``;
        ``with_attr({"global_symbol": "mm_relu"})`` sets several)."""
        update = dict(key) if isinstance(key, dict) else {key: value}
        return replace(self, attrs={**self.attrs, **update})


def range_extent(lo: PrimExpr, stop: PrimExpr) -> PrimExpr:
    """Extent of ``range(lo, stop)`` as TVM stores it: constants and ``- 0`` fold, ``lo + e`` gives back
    ``e``, anything else stays ``stop - lo`` unsimplified (like TVM, ``range(1, n)`` then prints
    as ``range(1, 1 + (n - 1))``)."""
    if isinstance(lo, IntImm) and isinstance(stop, IntImm):
        return IntImm(stop.value - lo.value, lo.dtype)
    if isinstance(lo, IntImm) and lo.value == 0:  # TVM's ``stop - 0`` folds
        return stop
    if isinstance(stop, BinaryOp) and stop.op == "Add" and stop.a == lo:
        return stop.b
    return BinaryOp("Sub", stop, lo)


def range_stop(lo: PrimExpr, extent: PrimExpr) -> PrimExpr:
    """The ``stop`` TVM prints for (min, extent): constants fold, else ``min + extent``."""
    if isinstance(lo, IntImm) and isinstance(extent, IntImm):
        return IntImm(lo.value + extent.value, lo.dtype)
    return BinaryOp("Add", lo, extent)


def seq(stmts) -> Stmt:
    """One statement from a list: the statement itself, or a SeqStmt."""
    stmts = tuple(stmts)
    return stmts[0] if len(stmts) == 1 else SeqStmt(stmts)


def stmt_children(s: Stmt) -> tuple:
    if isinstance(s, SeqStmt):
        return s.stmts
    if isinstance(s, (For, While)):
        return (s.body,)
    if isinstance(s, IfThenElse):
        return (s.then_case,) + ((s.else_case,) if s.else_case is not None else ())
    if isinstance(s, SBlock):
        return ((s.init,) if s.init is not None else ()) + (s.body,)
    return ()


def walk_stmts(s: Stmt):
    """Pre-order walk over ``s`` and every nested statement."""
    yield s
    for child in stmt_children(s):
        yield from walk_stmts(child)


def _identity_hash(node) -> int:
    return object.__hash__(node)


# TVM hashes IR nodes by address, and its tests read copy-on-write from the hashes (a statement
# rebuilt by a schedule hashes differently from the one a caller still holds); ``==`` stays
# value equality. A PrimFunc hashes by its text (equal functions hash equal, and a rebuilt one
# that differs hashes differently).
for _node in (BufferStore, Evaluate, SeqStmt, For, While, IfThenElse, LetStmt, AllocBuffer,
              AttrStmt, SBlock):
    _node.__hash__ = _identity_hash

