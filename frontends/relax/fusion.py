"""The fused ``msc.*`` patterns (msc-conventions 4.2) and the matcher that finds them.

A pattern is data: a tree of ``op(...)`` calls whose leaves are ``ANY(key)`` (any value) or
``CONST(key)`` (a constant), the captured keys in argument order (their roles come from
``roles.py``), and a check. The call keyed ``"anchor"`` names the fused node::

    conv = op("nn.conv2d", ANY("input"), CONST("weight"), key="anchor")
    FusedPattern("msc.conv2d_bias", op("add", conv, CONST("bias")),
                 ("input", "weight", "bias"), check=bias_fits_conv)

``fuse(view)`` tries the patterns in table order (larger ones first), binding by binding, like
TVM's ``FuseOpsByPattern``: a match claims its bindings, and a call whose result is also used
outside the match is never absorbed. Nothing is rewritten; the builder reads the groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from msc.relax.expr import Call, Constant, Expr, Var
from msc.relax.op.registry import OPS
from msc.relax.struct_info import TensorStructInfo

from .walk import FunctionView, op_name

__all__ = ["ANY", "CONST", "PATTERNS", "FusedGroup", "FusedPattern", "fuse", "op"]

ANCHOR = "anchor"


@dataclass(frozen=True)
class ANY:
    key: str


@dataclass(frozen=True)
class CONST:
    key: str


@dataclass(frozen=True)
class OpPattern:
    op: str
    args: tuple
    key: str = ""


def op(name: str, *args, key: str = "") -> OpPattern:
    return OpPattern(name, tuple(args), key)


@dataclass(frozen=True)
class FusedPattern:
    optype: str
    root: OpPattern
    args: tuple  # captured keys, in the fused node's argument order
    check: Callable = field(default=lambda m: True)


@dataclass
class Match:
    """What a pattern captured: leaf values and keyed calls (``key -> (var, call)``)."""

    view: FunctionView
    leaves: dict = field(default_factory=dict)
    calls: dict = field(default_factory=dict)
    members: list = field(default_factory=list)

    def copy(self) -> Match:
        return Match(self.view, dict(self.leaves), dict(self.calls), list(self.members))

    def sinfo(self, key: str):
        """Struct info of a captured leaf or of a keyed call's result."""
        if key in self.calls:
            return self.calls[key][0].struct_info
        return self.leaves[key].struct_info

    def attr(self, key: str, name: str, default=None):
        attrs = self.calls[key][1].attrs
        return attrs.get(name, default) if attrs is not None else default


@dataclass
class FusedGroup:
    """A matched pattern: the node it becomes and the bindings it absorbs."""

    optype: str
    root: Var
    anchor: Var
    members: list  # bound vars, in binding order
    calls: list  # their calls
    args: list  # the captured values, in the pattern's argument order
    keys: tuple  # the capture keys of ``args``


# --------------------------------------------------------------------------------------------
# Checks (MSC's _check_relax_*).

def _dims(sinfo) -> list:
    return list(sinfo.values or ()) if isinstance(sinfo, TensorStructInfo) else []


def _is_one(dim) -> bool:
    return dim.is_const and int(dim) == 1


def _channel_bias(m: Match, expanded) -> bool:
    """The expanded bias has the conv's rank, and 1s except the conv's out channels."""
    out_layout = m.attr(ANCHOR, "out_layout") or m.attr(ANCHOR, "data_layout") or ""
    dims, out = _dims(expanded), _dims(m.sinfo(ANCHOR))
    if len(dims) != len(out) or "C" not in out_layout:
        return False
    axis = out_layout.index("C")
    others = [d for k, d in enumerate(dims) if k != axis]
    return dims[axis] == out[axis] and all(_is_one(d) for d in others)


def bias_fits_conv(m: Match) -> bool:
    """add(conv, const): the bias has the conv's rank and one value per channel."""
    return _channel_bias(m, m.sinfo("bias"))


def reshaped_bias_fits_conv(m: Match) -> bool:
    """add(conv, reshape(const, shape)): a 1-D bias expanded along the channel axis."""
    return m.sinfo("bias").ndim == 1 and _channel_bias(m, m.sinfo("reshape"))


def linear_weight(m: Match) -> bool:
    if "permute" in m.calls and m.attr("permute", "axes") is not None:
        return False
    return m.sinfo("weight").ndim == 2


def linear_bias(m: Match) -> bool:
    """A bias of the out features: 1-D, or of the output's rank with 1s before the last dim."""
    bias, out = _dims(m.sinfo("bias")), _dims(m.sinfo(ANCHOR))
    if not (bias and out and bias[-1] == out[-1]) or not linear_weight(m):
        return False
    return len(bias) == 1 or (len(bias) == len(out) and all(_is_one(d) for d in bias[:-1]))


def embedding(m: Match) -> bool:
    weight = m.sinfo("weight")
    if weight.ndim != 2 or weight.dtype != "float32":
        return False
    if m.attr("astype", "dtype") != "int32" or m.attr(ANCHOR, "axis") != 0:
        return False
    return "reduce" not in m.calls or m.sinfo("reduce").ndim == 1


# --------------------------------------------------------------------------------------------
# The table, in priority order.

def _conv_bias(conv: str) -> list[FusedPattern]:
    optype = f"msc.{conv.removeprefix('nn.')}_bias"
    anchor = op(conv, ANY("input"), CONST("weight"), key=ANCHOR)
    reshape = op("reshape", CONST("bias"), ANY("expand_bias"), key="reshape")
    return [
        FusedPattern(optype, op("add", anchor, CONST("bias")), ("input", "weight", "bias"),
                     bias_fits_conv),
        FusedPattern(optype, op("add", anchor, reshape),
                     ("input", "weight", "bias", "expand_bias"), reshaped_bias_fits_conv),
    ]


def _linear() -> list[FusedPattern]:
    weights = (CONST("weight"), op("permute_dims", CONST("weight"), key="permute"))
    matmuls = [op("matmul", ANY("input"), w, key=ANCHOR) for w in weights]
    with_bias = [FusedPattern("msc.linear_bias", op("add", mm, CONST("bias")),
                              ("input", "weight", "bias"), linear_bias) for mm in matmuls]
    plain = [FusedPattern("msc.linear", mm, ("input", "weight"), linear_weight)
             for mm in matmuls]
    return with_bias + plain


def _embedding() -> list[FusedPattern]:
    astype = op("astype", ANY("input"), key="astype")
    reduce = op("reshape", astype, ANY("reduce_in"), key="reduce")
    reshaped = op("reshape", op("take", CONST("weight"), reduce, key=ANCHOR), ANY("expand_out"))
    return [
        FusedPattern("msc.embedding", reshaped, ("input", "reduce_in", "weight", "expand_out"),
                     embedding),
        FusedPattern("msc.embedding", op("take", CONST("weight"), astype, key=ANCHOR),
                     ("input", "weight"), embedding),
    ]


def _attention() -> list[FusedPattern]:
    qkv = [op("permute_dims", ANY(k)) for k in ("query", "key", "value")]
    return [
        FusedPattern("msc.attention",
                     op("permute_dims", op("nn.attention_bias", *qkv, ANY("bias"), key=ANCHOR)),
                     ("query", "key", "value", "bias")),
        FusedPattern("msc.attention", op("permute_dims", op("nn.attention", *qkv, key=ANCHOR)),
                     ("query", "key", "value")),
    ]


PATTERNS: list[FusedPattern] = [
    *_conv_bias("nn.conv1d"), *_conv_bias("nn.conv2d"), *_linear(), *_embedding(),
    *_attention(),
]


# --------------------------------------------------------------------------------------------
# Matching.

class _Matcher:
    def __init__(self, view: FunctionView):
        self.view = view
        self.claimed: set = set()

    def match(self, pat, expr: Expr, m: Match) -> Match | None:
        if isinstance(pat, ANY):
            m.leaves[pat.key] = expr
            return m
        if isinstance(pat, CONST):
            value = self.view.value_of(expr)
            if not isinstance(value, Constant):
                return None
            m.leaves[pat.key] = value
            return m
        return self._match_call(pat, expr, m)

    def _match_call(self, pat: OpPattern, expr: Expr, m: Match) -> Match | None:
        call = self.view.bound_value(expr) if isinstance(expr, Var) else None
        if not isinstance(call, Call) or op_name(call) != pat.op or expr in self.claimed \
                or len(call.args) != len(pat.args):
            return None
        orders = [pat.args]
        if OPS[pat.op].commutative:  # the arguments may match in either order (as in TVM)
            orders.append(pat.args[::-1])
        for args in orders:
            if not self._ops_fit(args, call.args):
                continue
            trial = m.copy()
            for sub, arg in zip(args, call.args):
                trial = self.match(sub, arg, trial) if trial is not None else None
            if trial is not None:
                trial.members.append(expr)
                if pat.key:
                    trial.calls[pat.key] = (expr, call)
                return trial
        return None

    def _ops_fit(self, pats: tuple, args: list) -> bool:
        """Each op sub-pattern faces a var bound to a call of that op: checked before the
        match is copied and walked (most tries fail right here)."""
        for sub, arg in zip(pats, args):
            if isinstance(sub, OpPattern):
                call = self.view.bound_value(arg) if isinstance(arg, Var) else None
                if not isinstance(call, Call) or op_name(call) != sub.op:
                    return False
        return True

    def group(self, pattern: FusedPattern, root: Var) -> FusedGroup | None:
        m = self.match(pattern.root, root, Match(self.view))
        if m is None or not self._self_contained(m, root) or not pattern.check(m):
            return None
        members = sorted(m.members, key=self.view.position)
        self.claimed.update(members)
        return FusedGroup(pattern.optype, root, m.calls[ANCHOR][0], members,
                          [self.view.bound_value(v) for v in members],
                          [m.leaves[k] for k in pattern.args], pattern.args)

    def _self_contained(self, m: Match, root: Var) -> bool:
        """Inner results are used only inside the match, and all of it is in one block."""
        inner_uses: dict = {}
        for var in m.members:
            for arg in self.view.bound_value(var).args:
                if isinstance(arg, Var) and arg in m.members:
                    inner_uses[arg] = inner_uses.get(arg, 0) + 1
        if any(self.view.uses[v] != inner_uses.get(v, 0) for v in m.members if v is not root):
            return False
        return len({self.view.block_of(v) for v in m.members}) == 1


def fuse(view: FunctionView, patterns: list[FusedPattern] | None = None) -> list[FusedGroup]:
    """The fused groups of ``view.func``, ordered by their root binding."""
    matcher = _Matcher(view)
    groups = []
    by_op: dict = {}  # a pattern is tried only on the calls of its root op (not on all)
    op_of: dict = {}  # bound var -> the op it calls
    for _, binding in view.bindings:
        if isinstance(binding.value, Call):
            name = op_of[binding.var] = op_name(binding.value)
            by_op.setdefault(name, []).append(binding)
    arg_ops: dict = {}  # root var -> the ops its arguments call
    for pattern in PATTERNS if patterns is None else patterns:
        need = {sub.op for sub in pattern.root.args if isinstance(sub, OpPattern)}
        for binding in by_op.get(pattern.root.op, ()):
            ops = arg_ops.get(binding.var)
            if ops is None:
                ops = arg_ops[binding.var] = {op_of.get(a) for a in binding.value.args
                                              if isinstance(a, Var)}
            if need and need.isdisjoint(ops):
                continue  # no argument is a call the pattern needs: most tries end here
            if binding.var not in matcher.claimed:
                group = matcher.group(pattern, binding.var)
                if group is not None:
                    groups.append(group)
    return sorted(groups, key=lambda g: view.position(g.root))
