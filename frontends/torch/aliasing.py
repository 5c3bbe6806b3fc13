"""In-place writes and the tensors that share their storage.

Relax values are immutable, so the torch frontend turns an in-place op (``x.relu_()``,
``nn.ReLU(inplace=True)``, ``F.relu(x, inplace=True)``, ``x += y``) into a new value that later
reads of the operand's node see. That is exact while nothing else shares the operand's storage.
A view of it (``x[:, :4]``, ``x.view(...)``, a ``chunk`` of it), or the tensor it is a view of,
read after the write would see the old values in msc and the new ones in torch: a silent wrong
answer. :func:`check_inplace` refuses exactly those writes.
"""

from __future__ import annotations

import inspect

from msc.errors import UnsupportedOpError

__all__ = ["check_inplace", "writes_in_place"]

# torch calls whose result is a view of their first argument (methods and functions by name).
VIEW_OPS = frozenset({
    "getitem", "view", "view_as", "reshape", "flatten", "unflatten", "narrow", "select",
    "transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis", "t", "T", "mT",
    "expand", "expand_as", "squeeze", "unsqueeze", "chunk", "split", "tensor_split", "unbind",
    "diagonal", "as_strided", "unfold", "detach", "alias", "real", "imag"})


def _name(node) -> str:
    if node.op == "call_method":
        return node.target
    if node.op == "call_function":
        return getattr(node.target, "__name__", "")
    return ""


def _source(node):
    """The node ``node`` is a view of, or None."""
    if _name(node) in VIEW_OPS and node.args and hasattr(node.args[0], "users"):
        return node.args[0]
    return None


def aliases(node) -> set:
    """Every node sharing storage with ``node`` through views (``node`` included)."""
    root = node
    while _source(root) is not None:
        root = _source(root)
    found, stack = {root}, [root]
    while stack:
        for user in stack.pop().users:
            if user not in found and _source(user) in found:
                found.add(user)
                stack.append(user)
    return found


def check_inplace(node, order: dict, op: str) -> None:
    """Refuse ``node``'s in-place write when another alias of its operand is read later."""
    operand = node.args[0]
    position = order[node]
    for alias in aliases(operand) - {operand}:
        later = [u for u in alias.users if order.get(u, -1) > position]
        if later:
            raise UnsupportedOpError(
                f"{op} writes {operand.name!r} in place while {alias.name!r} shares its storage "
                f"and is read afterwards (by {later[0].name!r}); msc's values are immutable, so "
                "that read would see the old values", op=op, node=node.name,
                hint="write it out of place (e.g. y = y.relu() instead of y.relu_(), "
                     "inplace=False), or clone the view before the write")


def writes_in_place(node, module=None) -> bool:
    """Whether a call writes its first argument through an ``inplace`` flag (modules such as
    ``nn.ReLU(inplace=True)`` or ``F.relu(x, inplace=True)`` / ``F.relu(x, True)``)."""
    if module is not None:
        return getattr(module, "inplace", False) is True
    if node.kwargs.get("inplace") is True:
        return True
    if node.op != "call_function":
        return False
    try:
        signature = inspect.signature(node.target)
        if "inplace" not in signature.parameters:
            return False
        return signature.bind(*node.args, **node.kwargs).arguments.get("inplace") is True
    except (TypeError, ValueError):  # no signature (a builtin), or args that do not bind
        return False
