"""The MSC graph model: MSCGraph of MSCJoints and MSCTensors, shape prims, the WeightGraph,
attribute encoding, layouts, and the JSON / prototxt / DOT forms (conventions 1 and 2).

    from msc.graph import MSCGraph, MSCJoint, MSCTensor
    graph = MSCGraph.from_json("msc/data/conv_relu.json")
    print(graph.inspect())
"""

from .attrs import encode_attr, encode_attrs, get_type_attr, parse_attr
from .graph import MSCGraph
from .joint import BaseJoint, MSCJoint, MSCPrim, WeightJoint
from .layout import Layout
from .outputs import OutputKind
from .tensor import MSCTensor, normalize_dtype
from .weight_graph import WEIGHT_STRATEGIES, WeightGraph

__all__ = [
    "WEIGHT_STRATEGIES",
    "BaseJoint",
    "Layout",
    "MSCGraph",
    "MSCJoint",
    "MSCPrim",
    "MSCTensor",
    "OutputKind",
    "WeightGraph",
    "WeightJoint",
    "encode_attr",
    "encode_attrs",
    "get_type_attr",
    "normalize_dtype",
    "parse_attr",
]
