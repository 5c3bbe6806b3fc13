"""``to_onnx(..., custom_domain=True)``: a joint that ONNX has no single operator for stays one
node, of its own op type in a custom domain, backed by an ONNX function (FunctionProto) of the
model whose body is the subgraph of standard ops the joint is written as. Runtimes that know
the domain run their own kernel; the others (onnxruntime among them) inline the function::

    model = to_onnx(graph, weights, custom_domain=True)      # domain "ai.msc"
    [n.op_type for n in model.graph.node]                     # ["nn_log_add_exp"]
    model.functions[0].name, model.functions[0].domain       # ("nn_log_add_exp", "ai.msc")

Weights stay initializers of the graph (inputs of the call), small constants become Constant
nodes of the body, and joints written alike (the same body up to names) share one function.
A joint with no ONNX expression at all still raises UnsupportedOpError naming it.
"""

from __future__ import annotations

import re

from .node import OnnxNode

__all__ = ["DEFAULT_DOMAIN", "FunctionTable", "domain_of"]

DEFAULT_DOMAIN = "ai.msc"


def domain_of(custom_domain) -> str | None:
    """``True`` -> ``"ai.msc"``, a name -> itself, None / False -> None."""
    if custom_domain is None or custom_domain is False:
        return None
    return DEFAULT_DOMAIN if custom_domain is True else str(custom_domain)


class FunctionTable:
    """The functions of one model, keyed by their body (names made positional)."""

    def __init__(self, domain: str, opset: int):
        self.domain, self.opset = domain, opset
        self.functions: dict[str, object] = {}  # body key -> FunctionProto
        self.names: set[str] = set()

    def wrap(self, writer, optype: str, start: int, first_init: int, outputs: list[str]):
        """Replace the nodes ``writer`` made from ``start`` by one call of a function; the
        joint's outputs keep their names. Returns False (nothing changed) when the nodes
        cannot be one call: one node only, an output the nodes did not make, or a value
        later joints read (a shape computed once per graph)."""
        body = writer.nodes[start:]
        made = [o for n in body for o in n.outputs]
        shared = set(writer.shapes.prims.values()) | set(writer.shapes.shapes.values())
        if len(body) < 2 or not set(outputs) <= set(made) or shared & set(made) or \
                len(set(outputs)) != len(outputs):
            return False
        weights = set(writer.init_of.values())
        consts = {k: writer.inits[k] for k in list(writer.inits)[first_init:]
                  if k not in weights}
        inputs = _inputs(body, set(made), consts)
        name = self._function(optype, body, inputs, outputs, consts)
        del writer.nodes[start:]
        writer.nodes.append(OnnxNode(name, inputs, list(outputs), domain=self.domain,
                                     name=writer.node_namer(f"{name}_call")))
        return True

    def _function(self, optype: str, body: list[OnnxNode], inputs: list[str], outputs: list[str],
                  consts: dict) -> str:
        from onnx import helper, numpy_helper

        rename = _positional(body, inputs, outputs, consts)
        nodes = [helper.make_node("Constant", [], [rename[k]], value=numpy_helper.from_array(
            v, rename[k])) for k, v in consts.items() if k in rename]
        nodes += [helper.make_node(n.op_type, [rename.get(v, v) for v in n.inputs],
                                   [rename[v] for v in n.outputs], name=f"n{i}",
                                   domain=n.domain or None, **n.attrs)
                  for i, n in enumerate(body)]
        key = b"".join(n.SerializeToString(deterministic=True) for n in nodes) + \
            repr((len(inputs), len(outputs))).encode()
        if key not in self.functions:
            fname = _unique(re.sub(r"[^0-9A-Za-z_]", "_", optype), self.names)
            self.functions[key] = helper.make_function(
                self.domain, fname, [rename[v] for v in inputs], [rename[v] for v in outputs],
                nodes, [helper.make_opsetid("", self.opset)])
        return self.functions[key].name

    def model_parts(self) -> tuple[list, list]:
        """(the FunctionProtos, the opset imports the model needs for them)."""
        from onnx import helper

        if not self.functions:
            return [], []
        return list(self.functions.values()), [helper.make_opsetid(self.domain, 1)]


def _inputs(body: list[OnnxNode], made: set, consts: dict) -> list[str]:
    """Values the body reads from outside (not made in it, not its constants), in order."""
    seen: list[str] = []
    for node in body:
        for v in node.inputs:
            if v and v not in made and v not in consts and v not in seen:
                seen.append(v)
    return seen


def _positional(body: list[OnnxNode], inputs: list[str], outputs: list[str], consts: dict) -> dict:
    """Value -> its name in the function: ``x0..`` inputs, ``y0..`` outputs, ``c0..``
    constants, ``t0..`` the rest (so joints written alike give the same body)."""
    rename = {v: f"x{i}" for i, v in enumerate(inputs)}
    rename.update({v: f"y{i}" for i, v in enumerate(outputs)})
    used = {v for n in body for v in n.inputs}
    rename.update({k: f"c{i}" for i, k in enumerate(k for k in consts if k in used)})
    temps = (o for n in body for o in n.outputs if o not in rename)
    rename.update({v: f"t{i}" for i, v in enumerate(temps)})
    rename[""] = ""
    return rename


def _unique(name: str, taken: set) -> str:
    candidate, k = name, 0
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    taken.add(candidate)
    return candidate
