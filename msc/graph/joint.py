"""Joints (nodes): BaseJoint, MSCJoint (an op), MSCPrim (a shape expression), WeightJoint.

An MSCJoint names its producers once, as ``inputs=[(parent_joint, out_idx), ...]``; the joint
derives its unique ``parents`` (first-use order) and stores ``inputs`` as ``(parent_idx,
out_idx)`` pairs. ``children`` are filled by the graph that owns the joint. Links are exposed as
tuples and attrs/weights as read-only mappings: only the graph changes them.

    >>> x = MSCTensor("inp_0:0", "float32", "NCHW", [1, 3, 10, 10], alias="inp_0")
    >>> inp = MSCJoint(0, "inp_0", "", "input", outputs=[x])
    >>> y = MSCTensor("relu:0", "float32", "NCHW", [1, 3, 10, 10])
    >>> relu = MSCJoint(1, "relu", "", "nn.relu", inputs=[(inp, 0)], outputs=[y])
    >>> relu.input_at(0).name, relu.inputs, [p.name for p in relu.parents]
    ('inp_0:0', ((0, 0),), ['inp_0'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..errors import ValidationError
from .attrs import MISSING, encode_attrs, get_type_attr
from .tensor import MSCTensor

__all__ = ["BaseJoint", "MSCJoint", "MSCPrim", "WeightJoint", "check_name", "item_at"]


def item_at(items: Sequence, index: int, what: str, node: str | None = None) -> Any:
    """``items[index]`` with negative indices allowed and a ValidationError when out of range."""
    if not isinstance(index, int) or not -len(items) <= index < len(items):
        raise ValidationError(f"{what} index {index!r} is out of range (there are {len(items)})",
                              node=node)
    return items[index]


def check_name(value: Any, what: str, node: str | None = None) -> str:
    """``value`` if it is a non-empty string, else a ValidationError about ``what``."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what} must be a non-empty string, got {value!r}", node=node)
    return value


def _str_list(values: Any, key: str, node: str) -> tuple[str, ...]:
    if type(values) is list or type(values) is tuple:
        try:
            "".join(values)  # one C-level test that every item is a str
            return tuple(values)
        except TypeError:
            pass  # the error below names the list
    values = () if values is None else values
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise ValidationError(f"{key} must be a list of strings, got {values!r}", node=node,
                              key=key)
    return tuple(values)


class BaseJoint:
    """Fields shared by every joint: index, name, shared_ref, attrs, parents, children."""

    __slots__ = ("_attrs", "_children", "_graph", "_index", "_name", "_parents", "_shared_ref")
    KIND = "B"  # prefix of the printed header, e.g. "ID_3 relu <...>"

    def __init__(self, index: int, name: str, shared_ref: str = "",
                 attrs: Mapping[str, Any] | None = None, parents: Sequence[BaseJoint] = ()):
        self._name = check_name(name, "joint name")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValidationError(f"index must be an int >= 0, got {index!r}", node=name)
        if not isinstance(shared_ref, str):
            raise ValidationError(f"shared_ref must be a string, got {shared_ref!r}", node=name)
        self._index = index
        self._shared_ref = shared_ref
        self._attrs = encode_attrs(attrs, node=name)
        self._parents: tuple[BaseJoint, ...] = tuple(parents)
        self._children: dict[str, BaseJoint] = {}
        self._graph: Any = None

    @property
    def index(self) -> int:
        return self._index

    @property
    def name(self) -> str:
        return self._name

    @property
    def shared_ref(self) -> str:
        return self._shared_ref

    @property
    def attrs(self) -> Mapping[str, str]:
        return MappingProxyType(self._attrs)

    @property
    def parents(self) -> tuple[BaseJoint, ...]:
        return self._parents

    @property
    def children(self) -> tuple[BaseJoint, ...]:
        return tuple(self._children.values())

    def parent_at(self, index: int) -> BaseJoint:
        return item_at(self._parents, index, "parent", self._name)

    def child_at(self, index: int) -> BaseJoint:
        return item_at(self.children, index, "child", self._name)

    def get_attrs(self) -> dict[str, str]:
        return dict(self._attrs)

    def get_attr(self, key: str, default: Any = None) -> Any:
        return self._attrs.get(key, default)

    def has_attr(self, key: str) -> bool:
        return key in self._attrs

    def get_type_attr(self, key: str, kind: type = str, default: Any = MISSING) -> Any:
        """Typed attr, e.g. ``node.get_type_attr("groups", int)``; see ``attrs.parse_attr``."""
        return get_type_attr(self._attrs, key, kind, default, node=self._name)

    def get_type_array_attr(self, key: str, kind: type = str, default: Any = MISSING) -> Any:
        """Typed array attr, e.g. ``node.get_type_array_attr("strides", int)`` -> ``[1, 1]``."""
        return get_type_attr(self._attrs, key, kind, default, array=True, node=self._name)

    def _add_child(self, child: BaseJoint) -> None:
        self._children.setdefault(child.name, child)

    def _header(self) -> str:
        ref = f"(M: {self._shared_ref})" if self._shared_ref else ""
        parents = ",".join(p.name for p in self._parents)
        children = ",".join(self._children)
        return f"{self.KIND}_{self._index} {self._name}{ref} <PARENTS: {parents}| CHILDERN: " \
               f"{children}>\n"

    @staticmethod
    def _attrs_line(attrs: Mapping[str, str]) -> str:
        return "ATTRS: " + "".join(f"{k}={v} " for k, v in attrs.items())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.KIND}_{self._index} {self._name}>"


def _link_inputs(name: str, inputs: Any) -> tuple[tuple[MSCJoint, ...], tuple]:
    parents: list[MSCJoint] = []
    positions: dict[str, int] = {}
    pairs = []
    for item in inputs or ():
        if type(item) is tuple and len(item) == 2 and type(item[0]) is MSCJoint and \
                type(item[1]) is int and 0 <= item[1] < len(item[0]._outputs):
            parent, out_idx = item  # the usual well-formed pair, checked inline
        else:
            parent, out_idx = _input_pair(name, item)
        p_idx = positions.setdefault(parent.name, len(parents))
        if p_idx == len(parents):
            parents.append(parent)
        elif parents[p_idx] is not parent:
            raise ValidationError(f"two different parents are named {parent.name!r}", node=name)
        pairs.append((p_idx, out_idx))
    return tuple(parents), tuple(pairs)


def _input_pair(name: str, item: Any) -> tuple[MSCJoint, int]:
    if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], MSCJoint)
            and isinstance(item[1], int)):
        raise ValidationError(f"an input must be a (parent MSCJoint, out_idx) pair, got {item!r}",
                              node=name, key="inputs")
    parent, out_idx = item
    if not 0 <= out_idx < len(parent.outputs):
        raise ValidationError(f"input {parent.name}:{out_idx} is out of range: {parent.name!r} "
                              f"has {len(parent.outputs)} outputs", node=name, key="inputs")
    return parent, out_idx


def _check_tensors(name: str, optype: str, outputs: Any, weights: Any) -> tuple[tuple, dict]:
    outputs = tuple(outputs or ())
    weights = dict(weights or {})
    for i, tensor in enumerate(outputs):
        if not isinstance(tensor, MSCTensor):
            raise ValidationError(f"output {i} is not an MSCTensor: {tensor!r}", node=name)
        if tensor.name != f"{name}:{i}" and not (optype == "constant" and tensor.name == name):
            raise ValidationError(f"output {i} is named {tensor.name!r}", node=name,
                                  hint=f"name output i of a node '<node>:<i>', here "
                                       f"'{name}:{i}'")
    for role, tensor in weights.items():
        if not isinstance(role, str) or not isinstance(tensor, MSCTensor):
            raise ValidationError(f"weights must map role names to MSCTensors, got {role!r}: "
                                  f"{tensor!r}", node=name, key="weights")
    return outputs, weights


class MSCJoint(BaseJoint):
    """An op node. Positional order follows MSC's Python constructor; ``scope`` is extra.

    ``inputs`` are ``(parent_joint, out_idx)`` pairs; ``attrs`` values that are not strings are
    encoded with ``attrs.encode_attr`` (``[1, 1]`` -> ``"1,1"``).
    """

    __slots__ = ("_inputs", "_optype", "_outputs", "_scope", "_weights")
    KIND = "ID"

    def __init__(self, index: int, name: str, shared_ref: str, optype: str,
                 attrs: Mapping[str, Any] | None = None,
                 inputs: Sequence[tuple[MSCJoint, int]] | None = None,
                 outputs: Sequence[MSCTensor] | None = None,
                 weights: Mapping[str, MSCTensor] | None = None, *,
                 scope: Sequence[str] | None = None):
        parents, pairs = _link_inputs(name, inputs)
        super().__init__(index, name, shared_ref, attrs, parents)
        self._optype = check_name(optype, "optype", name)
        self._scope = _str_list(scope, "scope", name)
        self._inputs = pairs
        self._outputs, self._weights = _check_tensors(name, optype, outputs, weights)

    @property
    def optype(self) -> str:
        return self._optype

    @property
    def scope(self) -> list[str]:
        return list(self._scope)

    @property
    def inputs(self) -> tuple[tuple[int, int], ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[MSCTensor, ...]:
        return self._outputs

    @property
    def weights(self) -> Mapping[str, MSCTensor]:
        return MappingProxyType(self._weights)

    def input_at(self, index: int) -> MSCTensor:
        p_idx, out_idx = item_at(self._inputs, index, "input", self._name)
        return self._parents[p_idx].output_at(out_idx)

    def output_at(self, index: int) -> MSCTensor:
        return item_at(self._outputs, index, "output", self._name)

    def weight_at(self, role: str) -> MSCTensor:
        if role not in self._weights:
            raise ValidationError(f"no weight with role {role!r}", node=self._name,
                                  hint=f"roles: {', '.join(self._weights) or 'none'}")
        return self._weights[role]

    def weight_type(self, name: str) -> str:
        """The role of the weight named ``name`` (the reverse of ``weight_at``)."""
        for role, weight in self._weights.items():
            if weight.name == name:
                return role
        raise ValidationError(f"no weight named {name!r}", node=self._name)

    def get_inputs(self) -> list[MSCTensor]:
        return [self._parents[p].output_at(o) for p, o in self._inputs]

    def get_outputs(self) -> list[MSCTensor]:
        return list(self._outputs)

    def get_weights(self) -> dict[str, MSCTensor]:
        return dict(self._weights)

    def producer_and_idx_of(self, ref: int | str | MSCTensor) -> tuple[MSCJoint, int]:
        """``(parent, out_idx)`` feeding input ``ref`` (an input index, tensor or its name)."""
        if isinstance(ref, int):
            p_idx, out_idx = item_at(self._inputs, ref, "input", self._name)
            return self._parents[p_idx], out_idx
        name = ref.name if isinstance(ref, MSCTensor) else ref
        for i, tensor in enumerate(self.get_inputs()):
            if tensor.name == name:
                return self.producer_and_idx_of(i)
        raise ValidationError(f"{name!r} is not an input", node=self._name)

    def producer_of(self, ref: int | str | MSCTensor) -> MSCJoint:
        return self.producer_and_idx_of(ref)[0]

    def input_pairs(self) -> list[tuple[MSCJoint, int]]:
        """The inputs as ``(parent_joint, out_idx)``, the form the constructor takes."""
        return [(self._parents[p], o) for p, o in self._inputs]

    def clone(self, inputs: Sequence[tuple[MSCJoint, int]] | None = None,
              **overrides: Any) -> MSCJoint:
        """A new, unowned joint with the same fields (and copies of its tensors); pass the new
        ``inputs`` pairs when the parents change (e.g. when rebuilding a graph), and any field
        as a keyword.

        >>> relu.clone(inputs=[(new_conv, 0)])  # doctest: +SKIP
        """
        fields = {"index": self._index, "name": self._name, "shared_ref": self._shared_ref,
                  "optype": self._optype, "attrs": self._attrs,
                  "outputs": [t.clone() for t in self._outputs],
                  "weights": {role: t.clone() for role, t in self._weights.items()},
                  "scope": self._scope}
        fields.update(overrides)
        return MSCJoint(inputs=self.input_pairs() if inputs is None else inputs, **fields)

    def equal(self, other: object) -> bool:
        """Same optype, attrs, and equal input, output and weight tensors (shape and dtype)."""
        if not isinstance(other, MSCJoint) or self._optype != other._optype:
            return False
        if self._attrs != other._attrs or self._weights.keys() != other._weights.keys():
            return False
        pairs = [(self.get_inputs(), other.get_inputs()), (self._outputs, other._outputs),
                 (list(self._weights.values()), [other._weights[k] for k in self._weights])]
        return all(len(a) == len(b) and all(x.equal(y) for x, y in zip(a, b)) for a, b in pairs)

    def __str__(self) -> str:
        lines = [self._header()]
        if self._inputs:
            lines.append("  IN: " + ",".join(str(t) for t in self.get_inputs()) + "\n")
        lines.append("  OUT: " + ",".join(str(t) for t in self._outputs) + "\n")
        lines.append(f"  OPTYPE: {self._optype}\n")
        if self._scope:
            lines.append("  SCOPE: " + ".".join(self._scope) + "\n")
        if self._attrs:
            lines.append("  " + self._attrs_line(self._attrs) + "\n")
        if self._weights:
            lines.append("  WEIGHTS: " + "".join(f"\n    {r}: {t}" for r, t in
                                                   self._weights.items()) + "\n")
        return "".join(lines)


class MSCPrim(BaseJoint):
    """A symbolic-shape expression node (conventions 1.3), e.g. ``MSCPrim(0, "bz", "shape",
    {"producer": "inp_0", "out_idx": 0, "dim": 0})`` or ``MSCPrim(2, "MUL_2", "Mul", {},
    [bz, int_1])``."""

    __slots__ = ("_optype",)
    KIND = "P"

    def __init__(self, index: int, name: str, optype: str,
                 attrs: Mapping[str, Any] | None = None, parents: Sequence[MSCPrim] = ()):
        parents = tuple(parents or ())
        if not all(isinstance(p, MSCPrim) for p in parents):
            raise ValidationError("the parents of a prim must be MSCPrims", node=name)
        super().__init__(index, name, "", attrs, parents)
        self._optype = check_name(optype, "optype", name)

    @property
    def optype(self) -> str:
        return self._optype

    def __str__(self) -> str:
        attrs = f"\n  {self._attrs_line(self._attrs)}" if self._attrs else ""
        return f"{self._header()}  OPTYPE: {self._optype}{attrs}\n"


class WeightJoint(BaseJoint):
    """A node of the WeightGraph (conventions 1.4): a weight (or relation output) tensor and
    its role; ``friends`` (a plain mutable list) must share out-channels when pruning."""

    __slots__ = ("_weight", "_weight_type", "friends")
    KIND = "W"

    def __init__(self, index: int, name: str, shared_ref: str, weight_type: str,
                 weight: MSCTensor, parents: Sequence[WeightJoint] = (),
                 attrs: Mapping[str, Any] | None = None,
                 friends: Sequence[WeightJoint] | None = None):
        super().__init__(index, name, shared_ref, attrs, tuple(parents or ()))
        self._weight_type = check_name(weight_type, "weight_type", name)
        if not isinstance(weight, MSCTensor):
            raise ValidationError(f"weight must be an MSCTensor, got {weight!r}", node=name)
        self._weight = weight
        self.friends: list[WeightJoint] = list(friends or ())

    @property
    def weight_type(self) -> str:
        return self._weight_type

    @property
    def weight(self) -> MSCTensor:
        return self._weight

    def set_attr(self, key: str, value: Any) -> None:
        """Set one attr (the pruner records ``pruned_shape`` this way)."""
        self._attrs.update(encode_attrs({key: value}, node=self._name))

    def __str__(self) -> str:
        lines = [self._header()]
        if self.friends:
            lines.append("  FRIENDS: " + ",".join(f.name for f in self.friends) + "\n")
        lines.append(f"  WEIGHT_TYPE: {self._weight_type}\n  WEIGHT: {self._weight}")
        if self._attrs:
            lines.append(f"\n  {self._attrs_line(self._attrs)}")
        return "".join(lines) + "\n"
