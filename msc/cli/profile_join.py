"""``msc bench MODEL.onnx --against-ort``: msc's per-joint profile beside onnxruntime's own
per-node profile, joined by ONNX node, the joints where msc loses most first.

Both runtimes fuse, differently: msc's joint ``conv2d`` may hold the ONNX nodes Conv + Add
(``graph.sources`` says which), onnxruntime's ``Conv_0`` may have swallowed the Relu after it,
and either may have folded a Shape -> Gather chain away. The join therefore works on groups
of ONNX nodes: two nodes of the source model are in one group when one msc row or one
onnxruntime node covers both, and a node neither runtime runs (folded, or fused into another
node without leaving its name) joins the group of the node that consumes its output. Each
group's row sums its msc rows and its onnxruntime nodes, so the two columns always time the
same ONNX nodes.

onnxruntime's nodes are found in the model it optimized (``optimized_model_filepath``): a
node keeps its ONNX name, or takes over the output of the ONNX node it replaced (a fused
Conv + Relu writes the Relu's output); a node of its own (a layout reorder) joins the node
whose output it reads. Times come from ``SessionOptions.enable_profiling`` (the ``Node``
events' ``_kernel_time``), msc's from ``vm.profile``, both as ms per run.

    >>> rows = against_ort(model.path, graph, report, arrays, threads=1)   # doctest: +SKIP
    >>> print(format_rows(rows, top=10))                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field

from ..errors import RuntimeCallError
from .runners import ort_session

__all__ = ["JoinRow", "against_ort", "format_rows", "join", "ort_fusion", "ort_node_times"]

_NOT_WORD = re.compile(r"\W")


@dataclass
class JoinRow:
    """One group of ONNX nodes: ms per run in msc and in onnxruntime, the ops both ran, and
    the ONNX nodes onnxruntime ran inside another node or not at all (``fused``)."""

    nodes: list
    msc_ms: float = 0.0
    ort_ms: float = 0.0
    msc_rows: list = field(default_factory=list)
    ort_nodes: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    fused: list = field(default_factory=list)

    @property
    def lost_ms(self) -> float:
        """What msc loses against onnxruntime on these nodes (negative: what it gains)."""
        return self.msc_ms - self.ort_ms

    @property
    def ratio(self) -> float | None:
        return self.msc_ms / self.ort_ms if self.ort_ms > 0 else None


# ---------------------------------------------------------------------------------------------
# onnxruntime's side


def node_key(node) -> str:
    """How an ONNX node is known to ``graph.sources``: its name, else its first output."""
    return node.name or node.output[0]


def ort_node_times(source, feeds: dict, threads: int | None, runs: int):
    """``({ORT node name: (op, ms per run)}, optimized ModelProto)``: onnxruntime's profile of
    ``runs`` runs (after one warm-up run) of ``source`` (a path or serialized model)."""
    import onnx

    with tempfile.TemporaryDirectory(prefix="msc_ort_profile_") as folder:
        optimized_path = os.path.join(folder, "optimized.onnx")
        session = ort_session(source, threads, optimized_model_filepath=optimized_path,
                              enable_profiling=True,
                              profile_file_prefix=os.path.join(folder, "ort_profile"))
        inputs = dict(zip([i.name for i in session.get_inputs()], feeds.values()))
        try:
            for _ in range(runs + 1):  # the first run is a warm-up: _node_times drops it
                session.run(None, inputs)
        except Exception as err:  # noqa: BLE001 - ORT's own types
            raise RuntimeCallError(f"onnxruntime failed on these inputs: {err}") from None
        with open(session.end_profiling()) as f:
            events = json.load(f)
        optimized = onnx.load(optimized_path, load_external_data=False)
    return _node_times(events, runs), optimized


def _node_times(events: list, runs: int) -> dict:
    """Per node: its op and ms per run, the first run (the warm-up) left out; a node run more
    than once a run (inside a loop) counts each call."""
    calls: dict = defaultdict(list)
    ops: dict = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        node = name[:-len("_kernel_time")]
        calls[node].append(event["dur"] / 1e3)
        ops[node] = event.get("args", {}).get("op_name", "?")
    out = {}
    for node, ms in calls.items():
        per_run = max(len(ms) // (runs + 1), 1)
        kept = ms[per_run:] or ms
        out[node] = (ops[node], statistics.median(kept) * per_run)
    return out


def ort_fusion(original, optimized) -> dict:
    """``{ORT node name: [ONNX node keys it runs]}`` from onnxruntime's optimized model: a node
    keeps its ONNX name (or that name with a suffix), or writes the output of the ONNX
    node(s) it replaced, or (a node of onnxruntime's own, such as a layout reorder) reads the
    output of an ONNX node."""
    keys = {node.name: node_key(node) for node in original.graph.node if node.name}
    producer = {out: node_key(node) for node in original.graph.node for out in node.output}
    found = {}
    for node in optimized.graph.node:
        mine = _named(node.name, keys, producer)
        mine += [producer[o] for o in node.output if o in producer and producer[o] not in mine]
        if not mine:
            mine = [producer[i] for i in node.input if i in producer][:1]
        found[node.name] = mine
    return found


def _named(name: str, keys: dict, producer: dict) -> list:
    """The ONNX node an onnxruntime node is named after: its own name, or that name less the
    suffixes onnxruntime appends to the node (or output) it rewrote (``conv_nchwc``,
    ``r32_nchwc``, ``Conv_0_fused_1``)."""
    while name:
        if name in keys:
            return [keys[name]]
        if name in producer:
            return [producer[name]]
        name = name.rpartition("_")[0]
    return []


# ---------------------------------------------------------------------------------------------
# The join


class _Groups:
    """Union-find over ONNX node keys."""

    def __init__(self, keys):
        self.parent = {k: k for k in keys}

    def find(self, key: str) -> str:
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def link(self, keys: list) -> None:
        keys = [k for k in keys if k in self.parent]
        for other in keys[1:]:
            self.parent[self.find(other)] = self.find(keys[0])


def _msc_rows(report, graph) -> list[tuple[str, float, list, list]]:
    """msc's rows as ``(name, ms per run, joints it ran, ops)``; a row's fused bindings are
    joints too. Binding names are joints or their identifier spelling."""
    named = {j: j for j in graph.node_names}
    for joint in graph.node_names:
        named.setdefault(_NOT_WORD.sub("_", joint), joint)
    rows = []
    for row in report.rows:
        joints = [named[b] for b in [row.joint, *row.fused] if b in named]
        rows.append((row.joint, row.seconds * 1e3, joints, list(dict.fromkeys(row.ops))))
    return rows


def join(original, graph, report, ort_times: dict, fusion: dict) -> list[JoinRow]:
    """The groups of ONNX nodes with both runtimes' times, the most msc loses first; msc rows
    and onnxruntime nodes that belong to no ONNX node are a group of their own each."""
    nodes = {node_key(n): n for n in original.graph.node}
    by_joint: dict = defaultdict(list)
    for source, joint in graph.sources.items():
        if source in nodes:
            by_joint[joint].append(source)
    msc_rows = _msc_rows(report, graph)
    groups = _Groups(nodes)
    for _, _, joints, _ in msc_rows:
        groups.link([k for j in joints for k in by_joint.get(j, [])])
    for name in ort_times:
        groups.link(fusion.get(name, []))
    ran = {k for n in ort_times for k in fusion.get(n, [])}
    ran_msc = {k for _, _, joints, _ in msc_rows for j in joints for k in by_joint.get(j, [])}
    for done in (ran, ran_msc):  # a node one runtime fused away joins its consumer's group
        _attach_unrun(original, groups, done)
    rows: dict = {}

    def row_of(keys: list, fallback: str) -> JoinRow:
        root = groups.find(keys[0]) if keys else fallback
        return rows.setdefault(root, JoinRow(nodes=[]))

    for key in nodes:
        row = row_of([key], key)
        row.nodes.append(key)
        if key not in ran:
            row.fused.append(key)
    for name, ms, joints, ops in msc_rows:
        keys = [k for j in joints for k in by_joint.get(j, [])]
        row = row_of(keys, f"msc:{name}")
        row.msc_ms += ms
        row.msc_rows.append(name)
        row.ops += [op for op in ops if op not in row.ops]
    for name, (op, ms) in ort_times.items():
        row = row_of(fusion.get(name, []), f"ort:{name}")
        row.ort_ms += ms
        row.ort_nodes.append(name)
        row.ops += [op] if op not in row.ops else []
    return sorted(rows.values(), key=lambda r: -r.lost_ms)


def _attach_unrun(original, groups: _Groups, ran: set) -> None:
    """An ONNX node a runtime did not run by its name joins the group of the first node (walking the
    consumers of its outputs) that one did run, else of the node that produced its input."""
    consumers: dict = defaultdict(list)
    producer = {}
    for node in original.graph.node:
        for name in node.input:
            consumers[name].append(node_key(node))
        for name in node.output:
            producer[name] = node
    by_key = {node_key(n): n for n in original.graph.node}
    for key, node in by_key.items():
        if key in ran:
            continue
        seen, todo = {key}, list(node.output)
        while todo:
            found = [c for c in consumers.get(todo.pop(0), []) if c not in seen]
            hit = next((c for c in found if c in ran), None)
            if hit is not None:
                groups.link([hit, key])
                break
            seen.update(found)
            todo += [o for c in found for o in by_key[c].output]
        else:
            inputs = [producer[i] for i in node.input if i in producer]
            if inputs:
                groups.link([node_key(inputs[0]), key])


def against_ort(source, original, graph, report, feeds: dict, threads: int | None,
                runs: int) -> list[JoinRow]:
    """Profile ``source`` in onnxruntime and join it with msc's ``report`` of ``graph``."""
    times, optimized = ort_node_times(source, feeds, threads, runs)
    return join(original, graph, report, times, ort_fusion(original, optimized))


def format_rows(rows: list[JoinRow], top: int | None = None) -> str:
    """The joined table: ms per run in each runtime, msc/ORT, ms lost, ops, the ONNX nodes."""
    lines = [f"{'ONNX nodes':<34}{'msc ms':>9}{'ORT ms':>9}{'msc/ORT':>9}{'lost ms':>9}  ops"]
    for row in rows[:top]:
        label = row.nodes[0] if row.nodes else (row.msc_rows or row.ort_nodes)[0]
        label += f" +{len(row.nodes) - 1}" if len(row.nodes) > 1 else ""
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        lines.append(f"{label[-33:]:<34}{row.msc_ms:>9.4f}{row.ort_ms:>9.4f}{ratio:>9}"
                     f"{row.lost_ms:>9.4f}  {'+'.join(row.ops)}")
    if top is not None and len(rows) > top:
        lines.append(f"... {len(rows) - top} more groups")
    msc, ort = sum(r.msc_ms for r in rows), sum(r.ort_ms for r in rows)
    lines.append(f"{'total':<34}{msc:>9.4f}{ort:>9.4f}"
                 f"{(f'{msc / ort:.2f}x' if ort else '-'):>9}{msc - ort:>9.4f}")
    return "\n".join(lines)
