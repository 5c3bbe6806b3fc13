"""Calibration -> the quantization plan, and the plan's JSON form.

A plan maps each quantized tensor to its parameters::

    {"relu:0": {"scale": 0.0123, "zero_point": 0, "axis": -1, "dtype": "uint8",
                "consumers": ["conv2d_1"]},
     "const_2": {"scale": [0.004, ...], "zero_point": [0, ...], "axis": 0, "dtype": "int8"}}

Activation tensors are per tensor (``axis`` -1) and list the joints that read the quantized
copy (``consumers``; absent = every reader); weights (keyed by weight name) are per channel
along the layout's ``O`` axis. ``save_plan`` / ``load_plan`` keep it as JSON so it can be
edited and re-applied with ``apply_plan``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

import numpy as np

from msc.codegen.joint import find_weight
from msc.errors import SerializationError, ValidationError
from msc.graph import MSCGraph, MSCJoint
from msc.graph.files import write_atomic
from msc.progress import progress

from ..fold import fold_batch_norm
from .config import MASK_RANGE, absorbs, chosen_nodes, read_config
from .observers import Observer
from .qparams import qparams_from_range, weight_qparams
from .runner import input_arrays, make_runner, with_outputs

__all__ = ["activation_targets", "calibrate", "load_plan", "read_plan_json", "save_plan",
           "weight_axis"]


def _absorbed(graph: MSCGraph, tensor) -> object:
    """The tensor that carries ``tensor``'s output QDQ: the output of a relu that is its only
    reader (onnxruntime's placement, see ``ABSORBED_ACTIVATIONS``), else ``tensor``."""
    readers = graph.find_consumers_and_indices(tensor)
    if len(readers) == 1 and absorbs(readers[0][0]):
        return readers[0][0].outputs[0]
    return tensor


def activation_targets(graph: MSCGraph, chosen: dict[str, MSCJoint],
                       outputs: bool = False, excluded=()) -> dict[str, list[str]]:
    """{float tensor read by a chosen joint (not a constant): [its chosen readers]}; with
    ``outputs``, also each chosen joint's outputs (or the relu after it) for all their
    readers but the ``excluded`` joints (onnxruntime's QDQ placement), graph outputs
    excepted. An excluded joint never reads a dequantized copy: between a DQ and a Q
    onnxruntime's optimizer would quantize its float weights itself."""
    targets: dict[str, list[str]] = {}

    def add(tensor, reader: str) -> None:
        readers = targets.setdefault(tensor.name, [])
        if reader not in readers:
            readers.append(reader)
    for node in chosen.values():
        for parent, out_idx in node.input_pairs():
            tensor = parent.output_at(out_idx)
            if parent.optype != "constant" and tensor.dtype.startswith("float"):
                add(tensor, node.name)
    for node in chosen.values() if outputs else ():
        for tensor in (_absorbed(graph, t) for t in node.outputs):
            if tensor.dtype.startswith("float") and tensor.name not in graph.output_names:
                for reader, _ in graph.find_consumers_and_indices(tensor):
                    if reader.name not in excluded:
                        add(tensor, reader.name)
    order = {n: i for i, n in enumerate(graph.node_names)}
    return {t: sorted(r, key=order.__getitem__) for t, r in targets.items()}


def weight_axis(node: MSCJoint, role: str) -> int:
    """The output-channel axis of a weight from its layout (OIHW -> 0, IO -> 1)."""
    tensor = node.weight_at(role)
    layout = tensor.layout.name
    if "O" not in layout:
        raise ValidationError(f"weight {role!r} has layout {layout!r} without an 'O' axis",
                              node=node.name, tensor=tensor.name,
                              hint="exclude this joint or give the weight a layout")
    return layout.index("O")


def _entry(scale, zero, axis: int, dtype: str, consumers=None) -> dict:
    entry = {"scale": np.asarray(scale).tolist(), "zero_point": np.asarray(zero).tolist(),
             "axis": int(axis), "dtype": dtype}
    if consumers is not None:
        entry["consumers"] = list(consumers)
    return entry


def _weight_entries(chosen: dict, weights: dict, config: dict) -> dict:
    plan = {}
    for node in chosen.values():
        for role in config["weight_roles"]:
            if role not in node.weights or node.weights[role].name in plan:
                continue
            axis = weight_axis(node, role)
            tensor = node.weight_at(role)
            value = find_weight(weights, tensor).reshape(tensor.shape)
            scale, zero = weight_qparams(value, axis, config["weight_dtype"])
            plan[tensor.name] = _entry(scale, zero, axis, config["weight_dtype"])
    return plan


class Calibration:
    """Observers for the activation targets, fed batch by batch through the float graph."""

    def __init__(self, graph: MSCGraph, weights: dict, targets: Iterable[str], config: dict):
        self.graph, self.config = graph, config
        self.targets = list(targets)
        self.run = make_runner(with_outputs(graph, self.targets), weights, config["executor"])
        histogram = config["method"] != "minmax"
        self.observers = {t: Observer(config["bins"], histogram) for t in self.targets}
        self.kept: list[list[np.ndarray]] = []  # the first inputs, for the report

    def feed(self, data) -> None:
        limit = self.config["max_batches"]
        for i, item in enumerate(progress(data, desc="calibrate", unit="batch")):
            if limit is not None and i >= limit:
                break
            arrays = input_arrays(self.graph, item)
            if len(self.kept) < self.config["report_batches"]:
                self.kept.append(arrays)
            values = self.run(arrays)
            for name in self.targets:
                self.observers[name].update(values[name])
        if not self.kept:
            raise ValidationError("the calibration data gave no batch", key="calib_data",
                                  hint="pass a non-empty iterable of input dicts or arrays")

    def entries(self, readers: dict[str, list[str]]) -> dict:
        dtype, symmetric = self.config["activation_dtype"], \
            self.config["activation_dtype"] == "int8"
        plan = {}
        for name, obs in self.observers.items():
            if obs.infinite or max(-obs.min, obs.max) >= MASK_RANGE:
                continue  # an additive attention mask's sum: stays float (see MASK_RANGE)
            rmin, rmax = obs.range(self.config["method"], symmetric, self.config["percentile"],
                                   entropy_bins=self.config["entropy_bins"])
            scale, zero = qparams_from_range(rmin, rmax, dtype)
            plan[name] = _entry(scale, zero, -1, dtype, readers[name])
        return plan


def calibrate(graph: MSCGraph, weights: dict, calib_data, config: dict | None = None,
              return_inputs: bool = False):
    """The plan (see module doc) of ``graph`` from one pass over ``calib_data`` (an iterable
    of input dicts, arrays or lists of arrays); weights need no data. With ``fold_bn`` (the
    default) the plan is for ``graph`` with its batch norms folded into the convs
    (``compression.fold``), which ``apply_plan`` does again by default.

    >>> plan = calibrate(graph, weights, [{"inp_0": x} for x in batches])   # doctest: +SKIP
    """
    config = read_config(config)
    if config["fold_bn"]:
        graph, weights, _ = fold_batch_norm(graph, weights)
    chosen = chosen_nodes(graph, config)
    excluded = {n.name for n in graph.get_nodes() if n.optype in config["optypes"]} - \
        set(chosen)
    readers = activation_targets(graph, chosen, config["quantize_outputs"], excluded)
    calibration = Calibration(graph, weights, readers, config)
    calibration.feed(calib_data)
    plan = {**calibration.entries(readers), **_weight_entries(chosen, weights, config)}
    return (plan, calibration.kept) if return_inputs else plan


def save_plan(plan: dict, path: str) -> None:
    write_atomic(path, json.dumps(plan, indent=1))


_ENTRY_KEYS = {"scale", "zero_point", "axis", "dtype"}


def read_plan_json(path_or_dict, what: str = "plan", writer: str = "save_plan"):
    """The JSON of a plan file (a dict passes through); an unreadable file raises
    SerializationError naming it and ``writer``, the function that writes such files."""
    if not isinstance(path_or_dict, (str, os.PathLike)):
        return path_or_dict
    try:
        with open(path_or_dict, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        raise SerializationError(f"cannot read the {what}: {err}", file=str(path_or_dict),
                                 hint=f"a {what} is the JSON written by {writer}") from None


def load_plan(path_or_dict) -> dict:
    """A plan from a JSON file (or a dict), every entry checked."""
    plan = read_plan_json(path_or_dict)
    if not isinstance(plan, dict):
        raise SerializationError("a plan must be a JSON object {tensor: {...}}")
    for name, entry in plan.items():
        if not isinstance(entry, dict) or not _ENTRY_KEYS <= set(entry):
            raise SerializationError(f"plan entry needs keys {sorted(_ENTRY_KEYS)}, got "
                                     f"{entry!r:.80}", tensor=name)
    return plan
