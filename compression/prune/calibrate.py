"""Calibration statistics for data-driven pruning: what the graph's layers see on sample inputs.

Magnitude criteria (``l1`` / ``l2``) read the weights alone. The data-driven ones read the
graph run on calibration inputs, through msc's own ``to_torch`` codegen (the same graph, not
the source model):

- *inputs* of the layers that consume a group's channels (a conv or linear whose input-channel
  axis is in the group): per input position, the sum of squares (Wanda's ``||x||``), and the
  raw inputs and a runner of the pruned graph for compensation (``compensate.py``);
- *gradients* of every float weight, one set per draw: with ``"l2"``, of the output's own
  ``0.5 * ||y||^2`` (there are no labels); with ``"fisher"``, of ``r . y`` for a fresh
  ``r ~ N(0, 1)`` per draw, whose outer products average to ``J^T J`` (the Fisher of a unit
  Gaussian around the model's own output: the Gauss-Newton curvature of the output error).

    stats = Calibration(analysis, weights, calib_data)
    stats.input_norms(["fc2"])         # {node: sum of x^2 per input channel}
    stats.gradients("fisher", draws=2) # [{weight name: grad}, ...]
"""

from __future__ import annotations

import tempfile

import numpy as np

from msc.errors import ValidationError

from ..quantize.runner import input_arrays, make_runner, with_outputs
from .context import parse_ints
from .rules import conv, linear, rule_of

__all__ = ["Calibration", "PrunedRunner", "consumer_kind", "layer_rows",
           "random_calibration"]


def consumer_kind(node) -> str | None:
    """``"linear"`` or ``"conv"`` when ``node`` is a layer whose weight reads its input's
    channels position by position (what Wanda and compensation need); None otherwise (a
    depthwise or grouped conv, a transposed conv, an unusual layout)."""
    ties = rule_of(node.optype).ties
    if "weight" not in node.weights:
        return None
    if ties is linear and node.weight_at("weight").ndim == 2:
        return "linear"
    if ties is conv and "transpose" not in node.optype:
        layout = node.get_attr("data_layout") or "NCHW"
        kernel = node.get_attr("kernel_layout") or ""
        if (parse_ints(node.get_attr("groups")) or [1])[0] == 1 and \
                layout in ("NCW", "NCHW") and kernel in ("OIW", "OIHW"):
            return "conv"
    return None


def _conv_patches(node, x: np.ndarray) -> np.ndarray:
    """``[rows, C * kernel]`` im2col patches of a conv's input, as the weight flattens."""
    import torch
    import torch.nn.functional as F

    w_shape = node.weight_at("weight").shape
    kernel = tuple(w_shape[2:])
    one_d = len(kernel) == 1
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    if one_d:
        t, kernel = t.unsqueeze(2), (1, *kernel)
    spatial = len(kernel)
    strides = parse_ints(node.get_attr("strides")) or [1] * spatial
    dilation = parse_ints(node.get_attr("dilation")) or [1] * spatial
    pads = parse_ints(node.get_attr("padding")) or [0] * spatial
    if one_d:
        strides, dilation = [1, strides[0]], [1, dilation[0]]
        pads = [0, pads[0], 0, pads[-1]]
    if len(pads) == 2:
        pads = [pads[0], pads[1], pads[0], pads[1]]
    t = F.pad(t, (pads[1], pads[3], pads[0], pads[2]))  # (left, right, top, bottom)
    cols = F.unfold(t, kernel, dilation=tuple(dilation), stride=tuple(strides))
    return cols.transpose(1, 2).reshape(-1, cols.shape[1]).double().numpy()


def layer_rows(node, x: np.ndarray) -> np.ndarray:
    """The rows a consumer layer multiplies its weight with: its input vectors (linear) or
    im2col patches (conv)."""
    if consumer_kind(node) == "linear":
        return x.reshape(-1, x.shape[-1]).astype(np.float64)
    return _conv_patches(node, x)


def random_calibration(graph, count: int = 8, seed: int = 0) -> list[list[np.ndarray]]:
    """``count`` draws of N(0, 1) inputs of the graph's input shapes (float inputs only: token
    ids need real data)."""
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(count):
        arrays = []
        for tensor in graph.get_inputs():
            if not tensor.dtype.startswith("float") or any(d < 0 for d in tensor.shape):
                raise ValidationError(f"no random calibration for input of dtype "
                                      f"{tensor.dtype} and shape {tensor.shape}",
                                      tensor=tensor.name, hint="give calibration data "
                                      "(calib_data=..., or --calib data.npz)")
            arrays.append(rng.standard_normal(tensor.shape).astype(tensor.dtype))
        items.append(arrays)
    return items


class Calibration:
    """The graph of ``analysis`` run on ``calib_data`` (a list of items, each a dict by input
    name / alias, an array or a list of arrays; see quantize's ``input_arrays``)."""

    def __init__(self, analysis, weights: dict, calib_data, seed: int = 0):
        if calib_data is None or len(calib_data) == 0:
            raise ValidationError("data-driven pruning needs calibration data",
                                  key="calib_data", hint="pass calib_data=[inputs, ...] "
                                  "(or --calib data.npz to msc prune)")
        self.analysis, self.graph, self.weights = analysis, analysis.graph, weights
        self.items = [input_arrays(self.graph, item) for item in calib_data]
        self.seed = seed

    # ---- layer inputs -------------------------------------------------------------------
    def input_norms(self, nodes) -> dict[str, np.ndarray]:
        """``{node: sum of squares of its input per input-channel position}`` over the
        calibration items (Wanda's ``||x||^2``), for consumer layers ``nodes``."""
        return {node: sum(self._sumsq(self.graph.find_node(node), x) for x in xs)
                for node, xs in self.raw_inputs(nodes).items()}

    @staticmethod
    def _sumsq(joint, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        axis = x.ndim - 1 if consumer_kind(joint) == "linear" else 1
        return (x ** 2).sum(axis=tuple(k for k in range(x.ndim) if k != axis))

    def raw_inputs(self, nodes) -> dict[str, list[np.ndarray]]:
        """``{node: [its data input on each calibration item]}`` in the unpruned graph."""
        nodes = list(dict.fromkeys(nodes))
        names = [self.graph.find_node(n).get_inputs()[0].name for n in nodes]
        run = make_runner(with_outputs(self.graph, names), self.weights)
        out: dict[str, list] = {n: [] for n in nodes}
        for arrays in self.items:
            values = run(arrays)
            for node, name in zip(nodes, names):
                out[node].append(np.asarray(values[name]))
        return out

    def pruned_runner(self, pruned, pruned_weights: dict, nodes) -> PrunedRunner:
        return PrunedRunner(pruned, pruned_weights, nodes)

    # ---- gradients ----------------------------------------------------------------------
    def gradients(self, loss: str, draws: int = 1) -> list[dict[str, np.ndarray]]:
        """Per draw, ``{weight name: dloss/dweight}`` of every float weight. ``loss``:
        ``"l2"`` (0.5 ||y||^2 of the float outputs, one draw per item) or ``"fisher"``
        (``r . y`` with ``r ~ N(0, 1)``, ``draws`` per item)."""
        import torch

        module, names = self._torch_module()
        params = dict(module.named_parameters())
        rng = np.random.default_rng(self.seed)
        out = []
        for arrays in self.items:
            for _ in range(draws if loss == "fisher" else 1):
                module.zero_grad(set_to_none=True)
                ys = module(*[torch.from_numpy(a) for a in arrays])
                ys = [y for y in (ys if isinstance(ys, (tuple, list)) else [ys])
                      if isinstance(y, torch.Tensor) and y.is_floating_point()]
                if loss == "fisher":
                    total = sum((y * torch.from_numpy(rng.standard_normal(tuple(y.shape))
                                                      .astype(np.float32))).sum() for y in ys)
                else:
                    total = sum(0.5 * (y.double() ** 2).sum() for y in ys)
                total.backward()
                out.append({names[k]: p.grad.detach().double().numpy().reshape(
                    np.shape(self.weights[names[k]]))
                    for k, p in params.items() if k in names and p.grad is not None})
        return out

    def _torch_module(self):
        """The graph as a torch module (float weights as parameters) and ``{parameter key:
        weight name}``."""
        from msc.codegen import to_torch
        from msc.codegen.torch.gen import TorchWriter

        writer = TorchWriter(self.graph, self.weights)
        writer.write()
        names = {key: tensor.name for key, tensor in writer.state.items()}
        with tempfile.TemporaryDirectory(prefix="msc_prune_") as folder:
            module = to_torch(self.graph, self.weights, {"need_test": False},
                              build_folder=folder)
        for p in module.parameters():
            p.requires_grad_(True)
        return module, names


class PrunedRunner:
    """The pruned graph as one torch module whose extra outputs are the data inputs of
    ``nodes``; ``update`` swaps weights in place, so a layer-by-layer refit needs no new
    codegen (a weight the module holds under another tensor's name, as ALBERT's shared
    layers, rebuilds it)."""

    def __init__(self, pruned, pruned_weights: dict, nodes):
        self.nodes = list(dict.fromkeys(nodes))
        self.names = [pruned.find_node(n).get_inputs()[0].name for n in self.nodes]
        self.graph = with_outputs(pruned, self.names)
        self.weights = dict(pruned_weights)
        self._build()

    def _build(self) -> None:
        from msc.codegen import to_torch
        from msc.codegen.torch.gen import TorchWriter

        writer = TorchWriter(self.graph, self.weights)
        writer.write()
        keys = {tensor.name: key for key, tensor in writer.state.items()}
        with tempfile.TemporaryDirectory(prefix="msc_prune_") as folder:
            self.module = to_torch(self.graph, self.weights, {"need_test": False},
                                   build_folder=folder)
        state = dict(self.module.named_parameters())
        self.params = {name: state[key] for name, key in keys.items() if key in state}
        self.outputs = list(self.graph.output_names)

    def update(self, arrays: dict) -> None:
        import torch

        self.weights.update(arrays)
        if any(name not in self.params for name in arrays):
            self._build()
            return
        with torch.no_grad():
            for name, value in arrays.items():
                param = self.params[name]
                param.copy_(torch.from_numpy(np.asarray(value)).reshape(param.shape))

    def __call__(self, arrays) -> dict[str, np.ndarray]:
        """``{node: its data input}`` on one calibration item."""
        import torch

        with torch.no_grad():
            out = self.module(*[torch.from_numpy(a) for a in arrays])
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        values = dict(zip(self.outputs, out))
        return {n: values[name].numpy() for n, name in zip(self.nodes, self.names)}
