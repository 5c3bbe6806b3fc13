"""The record of a schedule: instructions with their random decisions, as data.

A trace prints as TVM prints one (``b0 = sch.get_sblock(name="C", func_name="main")``, one
call per line), saves as TVM's JSON form ``[[[kind, inputs, attrs, outputs], ...],
[[inst_index, decision], ...]]`` and replays onto a fresh schedule of the same function::

    text = json.dumps(sch.trace.as_json())
    sch2 = Schedule(func)
    Trace.from_json(json.loads(text)).apply_to_schedule(sch2)
    assert sch2.mod["main"].script() == sch.mod["main"].script()

Inputs are random-variable names (``"b0"``, ``"l1"``, ``"v2"``), ints or None; attrs are
plain JSON values. Replaying with other decisions (``decisions=``) is how a search mutates a
sampled schedule.
"""

from __future__ import annotations

import json

from ...errors import ScheduleError, SerializationError
from .instruction import (
    LIST_RESULTS,
    Instruction,
    InstructionKind,
    is_rv,
    py_value,
    register_kinds,
)
from .rvs import rv_from_name, rv_prefix

__all__ = ["INSTRUCTIONS", "Instruction", "InstructionKind", "Trace"]


# kind -> (method name, attr names in order, python signature printer)
INSTRUCTIONS = {
    "GetSBlock": ("get_block", ["name", "func_name"]),
    "GetLoops": ("get_loops", []),
    "Split": ("split", ["preserve_unit_iters", "disable_predication"]),
    "LoopPartition": ("loop_partition", ["preserve_unit_iters"]),
    "Fuse": ("fuse", ["preserve_unit_iters"]),
    "Reorder": ("reorder", []),
    "Merge": ("merge", []),
    "Parallel": ("parallel", []),
    "Vectorize": ("vectorize", []),
    "Unroll": ("unroll", []),
    "CacheRead": ("cache_read", ["read_buffer_index", "storage_scope"]),
    "CacheWrite": ("cache_write", ["write_buffer_index", "storage_scope"]),
    "ComputeAt": ("compute_at", ["preserve_unit_loops", "index"]),
    "ReverseComputeAt": ("reverse_compute_at", ["preserve_unit_loops", "index"]),
    "DecomposeReduction": ("decompose_reduction", []),
    "ComputeInline": ("compute_inline", []),
    "SetScope": ("set_scope", ["buffer_index", "storage_scope"]),
    "RFactor": ("rfactor", ["factor_axis"]),
    "UnsafeSetDType": ("unsafe_set_dtype", ["buffer_index", "dtype"]),
    "StorageAlign": ("storage_align", ["buffer_index", "axis", "factor", "offset"]),
    "ReorderBlockIterVar": ("reorder_block_iter_var", ["new_order"]),
    "ReverseComputeInline": ("reverse_compute_inline", []),
    "ReIndex": ("reindex", ["buffer"]),
    "TransformBlockLayout": ("transform_block_layout", ["index_map"]),
    "FuseReductionEpilogue": ("fuse_reduction_epilogue", []),
    "Blockize": ("blockize", ["preserve_unit_iters"]),
    "AddUnitLoop": ("add_unit_loop", []),
    "GetProducers": ("get_producers", []),
    "GetConsumers": ("get_consumers", []),
    "GetOutputBlocks": ("get_output_blocks", ["scope_block"]),  # attr only for "root"
    "GetChildBlocks": ("get_child_blocks", []),
    "Tensorize": ("tensorize", ["tensor_intrin", "preserve_unit_iters"]),
    "Annotate": ("annotate", ["ann_key"]),  # inputs: the block or loop, the value
    "AnnotateBufferAccess": ("annotate_buffer_access", ["buffer_index", "buf_type",
                                                        "gen_new_ranges"]),
    "Unannotate": ("unannotate", ["ann_key"]),
    "TransformLayout": ("transform_layout", ["buffer", "index_map", "pad_value",
                                             "assume_injective_transform"]),
    "SamplePerfectTile": ("sample_perfect_tile", ["n", "max_innermost_factor"]),
    "SampleCategorical": ("sample_categorical", ["candidates", "probs"]),
    "EnterPostproc": ("enter_postproc", []),
    "RollingBuffer": ("rolling_buffer", ["write_buffer_index"]),
    "DecomposePadding": ("decompose_padding", []),
    "ReindexCacheRead": ("reindex_cache_read", ["read_buffer_index", "storage_scope",
                                                "index_map"]),
    "ReindexCacheWrite": ("reindex_cache_write", ["write_buffer_index", "storage_scope",
                                                  "index_map"]),
    "PadEinsum": ("pad_einsum", ["padding"]),
    "CacheIndex": ("cache_index", ["storage_scope", "cse_thresh"]),
}
_ALIASES = {"GetBlock": "GetSBlock"}  # TVM before the s_tir rename



class Trace:
    """Instructions in order and the decisions of the sampling ones (TVM's ``Trace``).

    ``decisions`` maps an instruction's index to its decision (TVM keys them by instruction;
    :meth:`get_decision` takes the instruction)."""

    def __init__(self, insts=None, decisions=None):
        self.insts = list(insts or [])
        self.decisions: dict = {}
        for key, decision in (decisions or {}).items():
            self.decisions[self._index(key)] = decision

    def _index(self, key) -> int:
        if isinstance(key, Instruction):
            for k, inst in enumerate(self.insts):
                if inst is key:
                    return k
            raise ScheduleError(f"{key} is not an instruction of this trace")
        return int(key)

    # ------------------------------------------------------------------ editing
    def append(self, inst: Instruction, decision=None) -> None:
        if decision is not None:
            self.decisions[len(self.insts)] = decision
        self.insts.append(inst)

    def pop(self) -> Instruction | None:
        """Remove and return the last instruction (None on an empty trace)."""
        if not self.insts:
            return None
        self.decisions.pop(len(self.insts) - 1, None)
        return self.insts.pop()

    def get_decision(self, inst: Instruction):
        """The decision of ``inst`` (None when it has none)."""
        return self.decisions.get(self._index(inst))

    def with_decision(self, inst: Instruction, decision, remove_postproc: bool) -> Trace:
        """A new trace with ``inst``'s decision replaced."""
        index = self._index(inst)
        n = _valid_count(self.insts, remove_postproc)
        return Trace(self.insts[:n], {**{k: d for k, d in self.decisions.items() if k < n},
                                      index: decision})

    def simplified(self, remove_postproc: bool) -> Trace:
        """The trace without pure instructions whose outputs nothing uses (dead code), cut
        at ``enter_postproc`` when ``remove_postproc``."""
        n = _valid_count(self.insts, remove_postproc)
        used: set = set()
        keep = []
        for k in range(n - 1, -1, -1):
            inst = self.insts[k]
            if inst.kind.is_pure and not any(id(o) in used for o in inst.outputs if o is not None):
                continue
            used.update(id(x) for x in _rvs_in(inst.inputs))
            keep.append(k)
        keep.reverse()
        return Trace([self.insts[k] for k in keep],
                     {j: self.decisions[k] for j, k in enumerate(keep) if k in self.decisions})

    # ------------------------------------------------------------------ forms
    def as_json(self, remove_postproc: bool = False) -> list:
        """``[[[kind, inputs, attrs, outputs], ...], [[index, decision], ...]]`` with the
        RVs named (``"b0"``, ``"l1"``)."""
        names: dict = {}
        insts, decided = [], []
        for k, inst in enumerate(self.insts[:_valid_count(self.insts, remove_postproc)]):
            inputs = _named(inst.inputs, names)
            outputs = _name_outputs(inst.outputs, names)
            insts.append([str(inst.kind), inputs, list(inst.attrs), outputs])
            if k in self.decisions:
                decided.append([k, self.decisions[k]])
        return [insts, decided]

    def as_python(self, remove_postproc: bool = False) -> list:
        """The trace as lines of Python (``b0 = sch.get_sblock(name="C", ...)``)."""
        names: dict = {}
        lines = []
        for k, inst in enumerate(self.insts[:_valid_count(self.insts, remove_postproc)]):
            inputs = {id(x): names.get(id(x), "_") for x in _rvs_in(inst.inputs)}
            outs = _name_outputs(inst.outputs, names)
            lines.append(python_line(inst, lambda x, m=inputs: m[id(x)], outs,
                                     self.decisions.get(k)))
        return lines

    @staticmethod
    def from_json(data) -> Trace:
        """A trace from :meth:`as_json` (or its JSON text); SerializationError names the bad
        instruction."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise SerializationError(f"trace is not JSON: {exc}") from None
        try:
            insts_data, decisions = data
            rows = [(_ALIASES.get(k, k), list(i), list(a), list(o)) for k, i, a, o in insts_data]
            decided = {int(py_value(k)): py_value(d) for k, d in decisions}
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"not a trace ([[insts], [decisions]]): {exc}") from None
        rvs: dict = {}
        insts = []
        for kind, inputs, attrs, outputs in rows:
            if kind not in INSTRUCTIONS:
                raise SerializationError(f"unknown schedule instruction {kind!r}", key=kind,
                                         hint=f"known: {sorted(INSTRUCTIONS)}")
            ins = [_from_name(x, rvs, kind) for x in inputs]
            outs = [rvs.setdefault(o, rv_from_name(o)) for o in outputs]
            insts.append(Instruction(kind, ins, py_value(attrs), outs))
        return Trace(insts, decided)

    @staticmethod
    def apply_json_to_schedule(json_obj, sch) -> None:
        """Replay the JSON form of a trace onto ``sch`` (TVM's ``Trace.apply_json_to_schedule``)."""
        Trace.from_json(json_obj).apply_to_schedule(sch)

    def __str__(self) -> str:
        lines = ["# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:"]
        lines += ["  " + line for line in self.as_python()] or ["  pass"]
        return "\n".join(lines)

    def show(self, style=None, black_format: bool = False) -> None:
        print(self)

    # ------------------------------------------------------------------ replay
    def apply_to_schedule(self, sch, remove_postproc: bool = False, decision_provider=None,
                          decisions: dict | None = None) -> None:
        """Run every instruction on ``sch`` (a fresh Schedule of the same function).
        ``decisions`` overrides recorded ones by instruction index; ``decision_provider(inst,
        inputs, attrs, decision)`` returns the decision to use (TVM's hook)."""
        decided = {**self.decisions, **(decisions or {})}
        rvs: dict = {}
        for k, inst in enumerate(self.insts[:_valid_count(self.insts, remove_postproc)]):
            method, names = INSTRUCTIONS[inst.kind]
            args = [_resolve(x, rvs, inst) for x in inst.inputs]
            attrs = py_value(inst.attrs)
            decision = decided.get(k)
            if decision_provider is not None:
                decision = decision_provider(inst, args, attrs, decision)
            kwargs = dict(zip(names, attrs))
            if decision is not None and inst.kind.startswith("Sample"):
                kwargs["decision"] = decision
            result = _call(sch, method, inst.kind, args, kwargs)
            outs = result if isinstance(result, (list, tuple)) else [result]
            if inst.outputs:
                if len(outs) != len(inst.outputs):
                    raise ScheduleError(f"replaying {inst.kind}: {len(outs)} results, the "
                                        f"trace has {len(inst.outputs)}", key=inst.kind)
                rvs.update({id(o): new for o, new in zip(inst.outputs, outs)})


register_kinds(list(INSTRUCTIONS), lambda *args: python_line(*args))


def _valid_count(insts: list, remove_postproc: bool) -> int:
    if remove_postproc:
        for k, inst in enumerate(insts):
            if inst.kind == "EnterPostproc":
                return k
    return len(insts)


def _rvs_in(values) -> list:
    out = []
    for x in values:
        if isinstance(x, (list, tuple)):
            out.extend(_rvs_in(x))
        elif is_rv(x):
            out.append(x)
    return out


def _named(values, names: dict) -> list:
    return [_named(x, names) if isinstance(x, (list, tuple)) else
            names.get(id(x), "_") if is_rv(x) else py_value(x) for x in values]


def _name_outputs(outputs, names: dict) -> list:
    out = []
    for o in outputs:
        if o is None:
            out.append("_")
            continue
        names[id(o)] = f"{rv_prefix(o)}{len(names)}"
        out.append(names[id(o)])
    return out


def _from_name(x, rvs: dict, kind: str):
    if isinstance(x, list):
        return [_from_name(y, rvs, kind) for y in x]
    if isinstance(x, str) and x != "None" and kind != "Annotate":
        if x not in rvs:
            raise SerializationError(f"{kind}: {x!r} is not defined earlier in the trace",
                                     key=kind)
        return rvs[x]
    if isinstance(x, str) and kind == "Annotate" and x in rvs:
        return rvs[x]
    return None if x == "None" else py_value(x)


def _call(sch, method: str, kind: str, args: list, kwargs: dict):
    if kind in ("Split", "LoopPartition"):
        return getattr(sch, method)(args[0], args[1:], **kwargs)
    if kind in ("Fuse", "Reorder", "Merge"):
        return getattr(sch, method)(*args, **kwargs)
    if kind == "SampleCategorical":
        return sch.sample_categorical(**kwargs)
    if kind == "Annotate":
        return sch.annotate(args[0], kwargs["ann_key"], args[1])
    if kind in ("CacheRead", "CacheWrite"):  # inputs: the block, then the consumer blocks
        return getattr(sch, method)(args[0], consumer_blocks=args[1:] or None, **kwargs)
    return getattr(sch, method)(*args, **kwargs)


def _resolve(x, rvs: dict, inst: Instruction):
    if isinstance(x, (list, tuple)):
        return [_resolve(y, rvs, inst) for y in x]
    if is_rv(x):
        if id(x) not in rvs:
            raise ScheduleError(f"replaying {inst.kind}: {x!r} is not defined earlier in the "
                                "trace", key=inst.kind)
        return rvs[id(x)]
    return py_value(x)


def python_line(inst: Instruction, name_of, outputs: list, decision) -> str:
    """One instruction as TVM prints it: ``l1, l2 = sch.split(loop=l0, factors=[None, 4],
    ...)``; ``name_of(rv)`` names an input RV."""
    method, names = INSTRUCTIONS[inst.kind]
    if inst.kind == "GetSBlock":
        method = "get_sblock"
    args = _args(inst, name_of)
    attrs = [tuple(a) if n in _TUPLES else a for n, a in zip(names, inst.attrs)]
    args += [f"{n}={_py(v)}" for n, v in zip(names, attrs)]
    if decision is not None:
        args.append(f"decision={_py(decision)}")
    if inst.kind == "Annotate" and len(inst.inputs) > 1:
        value = inst.inputs[1]
        args.append(f"ann_val={name_of(value) if is_rv(value) else _py(value)}")
    call = f"sch.{method}({', '.join(args)})"
    if not outputs:
        return call
    if len(outputs) == 1 and inst.kind in LIST_RESULTS:
        return f"{outputs[0]}, = {call}"
    return f"{', '.join(outputs)} = {call}"


_FIRST = {"GetLoops": "block", "ComputeInline": "block", "ReverseComputeInline": "block",
          "Parallel": "loop", "Vectorize": "loop", "Unroll": "loop",
          "CacheRead": "block", "CacheWrite": "block", "SamplePerfectTile": "loop",
          "RFactor": "loop", "ReorderBlockIterVar": "block", "ReIndex": "block",
          "TransformBlockLayout": "block", "TransformLayout": "block", "Blockize": "target",
          "UnsafeSetDType": "block", "AnnotateBufferAccess": "block",
          "AddUnitLoop": "block_or_loop", "GetChildBlocks": "block_or_loop",
          "Tensorize": "block_or_loop",
          "GetProducers": "block", "GetConsumers": "block", "GetOutputBlocks": "scope_block",
          "Annotate": "block_or_loop", "Unannotate": "block_or_loop",
          "ReindexCacheRead": "block", "ReindexCacheWrite": "block", "PadEinsum": "block",
          "CacheIndex": "block"}


def _args(inst: Instruction, name_of) -> list:
    ins = [name_of(x) if is_rv(x) else _py(x) for x in inst.inputs]
    if inst.kind in ("Split", "LoopPartition"):
        return [f"loop={ins[0]}", f"factors=[{', '.join(ins[1:])}]"]
    if inst.kind in ("ComputeAt", "ReverseComputeAt", "DecomposeReduction"):
        return [f"block={ins[0]}", f"loop={ins[1]}"]
    if inst.kind == "FuseReductionEpilogue":
        return [f"reduction_block={ins[0]}", f"epilogue_block={ins[1]}"]
    if inst.kind == "Annotate":  # TVM: inputs [target, value], attrs [key]
        return [f"block_or_loop={ins[0]}"]
    if inst.kind in _FIRST and ins:
        return [f"{_FIRST[inst.kind]}={ins[0]}"]
    return ins


_TUPLES = {"buffer"}  # attrs TVM prints as a tuple: buffer=("read", 0)


def _py(v) -> str:
    v = v if isinstance(v, tuple) else py_value(v)
    if isinstance(v, tuple):
        return f"({', '.join(_py(x) for x in v)})"
    if isinstance(v, list):
        return f"[{', '.join(_py(x) for x in v)}]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(x)}" for k, x in v.items()) + "}"
    if isinstance(v, float):
        return f"{v:g}"  # as TVM's printer writes a double: 1.0 -> 1
    return json.dumps(v) if isinstance(v, str) else repr(v)
