"""Builders of small Relax modules for the from_relax tests: vars, constants, one-function
modules, and the graph's nodes / optypes as dicts and lists."""

import numpy as np

from msc import relax
from msc.frontends.translate import from_relax
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module as module

RNG = np.random.default_rng(0)


def var(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def const(*shape, dtype="float32"):
    return relax.const(RNG.standard_normal(shape).astype(dtype))




def translate(params, body, **kw):
    graph, weights = from_relax(module(params, body), **kw)
    graph.check()  # links, indices, names and weight holders are consistent
    return graph, weights


def nodes(graph):
    return {n.name: n for n in graph.get_nodes()}


def optypes(graph):
    return [(n.name, n.optype) for n in graph.get_nodes()]


def roles(graph, name):
    """A node's weights: role -> (tensor name, layout, shape)."""
    return {r: (t.name, t.layout.name, t.shape) for r, t in graph.find_node(name).weights.items()}


# The conventions' JSON example (torch Conv2d(3, 6, 7) as from_fx emits it): its weights and body.
W_CONV, B_CONV = const(6, 3, 7, 7), const(6)


def conv_fx(bb, x):
    conv = bb.emit(R.nn.conv2d(x, W_CONV, out_dtype="float32"))
    return bb.emit(R.add(conv, bb.emit(R.reshape(B_CONV, [1, 6, 1, 1]))))
