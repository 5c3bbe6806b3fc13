"""Measuring a QDQ model against the float one: per tensor, per layer, and the exclude search.

- **Per tensor** (one float and one QDQ pass): each quantized activation as the QDQ model
  computes it (``t_dq``, so earlier quantizers' errors are included: ORT's ``xmodel_err``)
  against the float model's ``t``, plus the local error of its own quantizer (``t`` vs
  ``t_dq`` inside the QDQ model); each weight against its float values.
- **Per layer** (one pass per chosen joint): the model output's error when only that joint's
  inputs and weights are quantized (AIMET's per-layer "quant enabled" analysis). The layers
  are ranked by it, worst first.
- **Suggested excludes**: exclude the worst-ranked layer, re-measure the output, repeat until
  the output SQNR meets the target; then try to put each excluded layer back, last first,
  and keep it quantized if the target still holds. Every step is a measurement.
"""

from __future__ import annotations

from collections.abc import Callable

from msc.codegen.joint import find_weight
from msc.graph import MSCGraph
from msc.progress import progress

from .config import absorbs
from .metrics import ErrorStats
from .qdq import apply_plan
from .runner import make_runner, with_outputs

__all__ = ["Measurer", "dequantized_of", "layer_names", "plan_only", "plan_without"]


def _producer_layer(graph: MSCGraph, tensor: str, chosen) -> str | None:
    """The chosen joint whose output QDQ ``tensor`` carries (through an absorbed relu)."""
    if not graph.has_tensor(tensor):
        return None
    node = graph.find_producer(tensor)
    if absorbs(node) and node.input_pairs():
        node = node.input_pairs()[0][0]
    return node.name if chosen is None or node.name in chosen else None


def _keeps(reader: str, producer: str | None, chosen, excluded) -> bool:
    """Does a reader keep reading the quantized copy once ``excluded`` stay float? A chosen
    reader decides for its input; any other reader follows the chosen producer (its output
    QDQ, onnxruntime's placement)."""
    if chosen is None or reader in chosen:
        return reader not in excluded
    return producer is None or producer not in excluded


def plan_without(plan: dict, graph: MSCGraph, excluded, chosen=None) -> dict:
    """``plan`` with the joints ``excluded`` left float (their inputs, weights and output
    QDQ). ``chosen``: the quantized joints (None: every reader counts as one)."""
    excluded = set(excluded)
    held = {w.name for name in excluded for w in graph.find_node(name).weights.values()}
    out = {}
    for name, entry in plan.items():
        if name in held:
            continue
        if "consumers" in entry:
            producer = _producer_layer(graph, name, chosen)
            readers = [c for c in entry["consumers"] if _keeps(c, producer, chosen, excluded)]
            if not readers:
                continue
            entry = {**entry, "consumers": readers}
        out[name] = entry
    return out


def plan_only(plan: dict, graph: MSCGraph, layer: str, chosen=None) -> dict:
    """The part of ``plan`` that quantizes joint ``layer`` alone (its inputs, weights, and
    its output QDQ for readers that are not quantized joints themselves)."""
    others = set(chosen or ()) - {layer}
    return plan_without(plan, graph, others, chosen) if chosen is not None else \
        _plan_only_readers(plan, graph, layer)


def _plan_only_readers(plan: dict, graph: MSCGraph, layer: str) -> dict:
    node = graph.find_node(layer)
    held = {w.name for w in node.weights.values()}
    inputs = {t.name for t in node.get_inputs()}
    out = {n: e for n, e in plan.items() if n in held}
    out.update({n: {**e, "consumers": [layer]} for n, e in plan.items()
                if n in inputs and layer in e.get("consumers", [layer])})
    return out


class Measurer:
    """Runs graph variants on the kept calibration inputs against the float outputs."""

    def __init__(self, graph: MSCGraph, weights: dict, inputs: list, executor: str,
                 chosen=None):
        self.graph, self.weights, self.inputs, self.executor = graph, weights, inputs, executor
        self.chosen = chosen
        run = make_runner(graph, weights, executor)
        self.reference = [run(arrays) for arrays in inputs]
        self.runs = 0

    def output_error(self, plan: dict) -> dict:
        """Error of the graph outputs of the QDQ model of ``plan`` (all outputs pooled)."""
        qgraph, qweights = apply_plan(self.graph, self.weights, plan, fold_bn=False)
        run = make_runner(qgraph, qweights, self.executor)
        stats = ErrorStats()
        for arrays, ref in zip(self.inputs, self.reference):
            got = run(arrays)
            for name in self.graph.output_names:
                stats.add(ref[name], got[name])
        self.runs += 1
        return stats.result()

    def tensor_errors(self, plan: dict) -> dict:
        """{tensor: {kind, sqnr_db, cosine, max_abs_error, local_sqnr_db}} for the plan."""
        acts = [n for n in plan if n not in self.graph.weight_holders]
        result = self._weight_errors(plan)
        if not acts:
            return result
        qgraph, qweights = apply_plan(self.graph, self.weights, plan, fold_bn=False)
        dq = dequantized_of(qgraph)
        run_f = make_runner(with_outputs(self.graph, acts), self.weights, self.executor)
        run_q = make_runner(with_outputs(qgraph, [*acts, *dq.values()]), qweights,
                            self.executor)
        cumulative = {n: ErrorStats() for n in acts}
        local = {n: ErrorStats() for n in acts}
        for arrays in self.inputs:
            ref, got = run_f(arrays), run_q(arrays)
            for n in acts:
                cumulative[n].add(ref[n], got[dq[n]])
                local[n].add(got[n], got[dq[n]])
        for n in acts:
            result[n] = {"kind": "activation", **cumulative[n].result(),
                         "local_sqnr_db": local[n].result()["sqnr_db"]}
        return result

    def _weight_errors(self, plan: dict) -> dict:
        _, qweights = apply_plan(self.graph, self.weights, {
            n: e for n, e in plan.items() if n in self.graph.weight_holders}, fold_bn=False)
        result = {}
        for name in plan:
            if name in self.graph.weight_holders:
                tensor = self.graph.find_tensor(name)
                stats = ErrorStats().add(find_weight(self.weights, tensor), qweights[name])
                result[name] = {"kind": "weight", **stats.result()}
                result[name]["local_sqnr_db"] = result[name]["sqnr_db"]
        return result

    def layer_errors(self, plan: dict, layers: list[str]) -> dict:
        """{layer: output error with only that layer quantized}."""
        return {layer: self.output_error(plan_only(plan, self.graph, layer, self.chosen))
                for layer in progress(layers, desc="per-layer error", unit="layer")}

    def suggest_excludes(self, plan: dict, ranked: list[str], target: float,
                         log: Callable | None = None) -> tuple[list[str], dict, list]:
        """Greedy: exclude the worst layers until the output SQNR reaches ``target`` dB,
        then put back every layer that is not needed. Returns (excludes, error, steps)."""
        excluded, steps = [], []
        error = self.output_error(plan)
        for layer in ranked:
            if error["sqnr_db"] >= target:
                break
            excluded.append(layer)
            error = self.output_error(plan_without(plan, self.graph, excluded, self.chosen))
            steps.append({"exclude": layer, "output_sqnr_db": error["sqnr_db"]})
        if error["sqnr_db"] < target:
            return excluded, error, steps
        for layer in reversed(excluded[:-1]):
            trial = [e for e in excluded if e != layer]
            trial_error = self.output_error(plan_without(plan, self.graph, trial,
                                                         self.chosen))
            if trial_error["sqnr_db"] >= target:
                excluded, error = trial, trial_error
                steps.append({"restore": layer, "output_sqnr_db": error["sqnr_db"]})
        return excluded, error, steps


def dequantized_of(qgraph: MSCGraph) -> dict[str, str]:
    """{float tensor: the dequantize output standing for it} in a QDQ graph."""
    found = {}
    for node in qgraph.get_nodes():
        if node.optype == "dequantize" and node.producer_of(0).optype == "quantize":
            found[node.producer_of(0).input_at(0).name] = node.output_at(0).name
    return found


def layer_names(plan: dict, graph: MSCGraph, chosen=None) -> list[str]:
    """The joints the plan quantizes (readers of activations, holders of weights; with
    ``chosen``, those of them that are chosen, and the producers of output QDQs)."""
    layers = []
    for name, entry in plan.items():
        readers = entry.get("consumers") if "consumers" in entry else \
            graph.weight_holders.get(name, ())
        if chosen is not None:
            producer = _producer_layer(graph, name, chosen) if "consumers" in entry else None
            readers = [r for r in readers if r in chosen] + ([producer] if producer else [])
        layers.extend(r for r in readers if r not in layers)
    order = {n: i for i, n in enumerate(graph.node_names)}
    return sorted(layers, key=order.__getitem__)

