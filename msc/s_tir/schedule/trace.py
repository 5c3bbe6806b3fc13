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
from dataclasses import dataclass, field

from ...errors import ScheduleError, SerializationError

__all__ = ["INSTRUCTIONS", "Instruction", "Trace"]


@dataclass
class Instruction:
    kind: str
    inputs: list
    attrs: list
    outputs: list

    def as_json(self) -> list:
        return [self.kind, list(self.inputs), list(self.attrs), list(self.outputs)]


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
    "Annotate": ("annotate", ["ann_key", "ann_val"]),
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
}
_ALIASES = {"GetBlock": "GetSBlock"}  # TVM before the s_tir rename


@dataclass
class Trace:
    insts: list = field(default_factory=list)
    decisions: dict = field(default_factory=dict)  # instruction index -> decision

    def append(self, inst: Instruction, decision=None) -> None:
        if decision is not None:
            self.decisions[len(self.insts)] = decision
        self.insts.append(inst)

    # ------------------------------------------------------------------ forms
    def as_json(self) -> list:
        return [[i.as_json() for i in self.insts],
                [[k, d] for k, d in sorted(self.decisions.items())]]

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
            insts = [Instruction(_ALIASES.get(k, k), list(i), list(a), list(o))
                     for k, i, a, o in insts_data]
            decided = {int(k): d for k, d in decisions}
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"not a trace ([[insts], [decisions]]): {exc}") from None
        for inst in insts:
            if inst.kind not in INSTRUCTIONS:
                raise SerializationError(f"unknown schedule instruction {inst.kind!r}",
                                         key=inst.kind, hint=f"known: {sorted(INSTRUCTIONS)}")
        return Trace(insts, decided)

    def __str__(self) -> str:
        lines = ["# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:"]
        lines += ["  " + _line(inst, self.decisions.get(k)) for k, inst in enumerate(self.insts)]
        return "\n".join(lines)

    def show(self) -> None:
        print(self)

    # ------------------------------------------------------------------ replay
    def apply_to_schedule(self, sch, decisions: dict | None = None) -> None:
        """Run every instruction on ``sch`` (a fresh Schedule of the same function);
        ``decisions`` overrides recorded ones by instruction index."""
        decided = {**self.decisions, **(decisions or {})}
        rvs: dict = {}
        for k, inst in enumerate(self.insts):
            method, names = INSTRUCTIONS[inst.kind]
            args = [_resolve(x, rvs, inst) for x in inst.inputs]
            kwargs = dict(zip(names, inst.attrs))
            if k in decided and inst.kind.startswith("Sample"):
                kwargs["decision"] = decided[k]
            result = _call(sch, method, inst.kind, args, kwargs)
            outs = result if isinstance(result, (list, tuple)) else [result]
            if inst.outputs:
                if len(outs) != len(inst.outputs):
                    raise ScheduleError(f"replaying {inst.kind}: {len(outs)} results, the "
                                        f"trace has {len(inst.outputs)}", key=inst.kind)
                rvs.update(zip(inst.outputs, outs))


def _call(sch, method: str, kind: str, args: list, kwargs: dict):
    if kind in ("Split", "LoopPartition"):
        return getattr(sch, method)(args[0], args[1:], **kwargs)
    if kind in ("Fuse", "Reorder", "Merge"):
        return getattr(sch, method)(*args, **kwargs)
    if kind == "SampleCategorical":
        return sch.sample_categorical(**kwargs)
    return getattr(sch, method)(*args, **kwargs)


def _resolve(x, rvs: dict, inst: Instruction):
    if isinstance(x, str):
        if x not in rvs:
            raise ScheduleError(f"replaying {inst.kind}: {x!r} is not defined earlier in the "
                                "trace", key=inst.kind)
        return rvs[x]
    return x


def _line(inst: Instruction, decision) -> str:
    method, names = INSTRUCTIONS[inst.kind]
    if inst.kind == "GetSBlock":
        method = "get_sblock"
    args = _args(inst)
    attrs = [tuple(a) if n in _TUPLES else a for n, a in zip(names, inst.attrs)]
    args += [f"{n}={_py(v)}" for n, v in zip(names, attrs)]
    if decision is not None:
        args.append(f"decision={_py(decision)}")
    call = f"sch.{method}({', '.join(args)})"
    return f"{', '.join(inst.outputs)} = {call}" if inst.outputs else call


_FIRST = {"GetLoops": "block", "ComputeInline": "block", "ReverseComputeInline": "block",
          "Parallel": "loop", "Vectorize": "loop", "Unroll": "loop",
          "CacheRead": "block", "CacheWrite": "block", "SamplePerfectTile": "loop",
          "RFactor": "loop", "ReorderBlockIterVar": "block", "ReIndex": "block",
          "TransformBlockLayout": "block", "TransformLayout": "block", "Blockize": "target",
          "UnsafeSetDType": "block", "AnnotateBufferAccess": "block",
          "AddUnitLoop": "block_or_loop",
          "GetProducers": "block", "GetConsumers": "block", "GetOutputBlocks": "scope_block",
          "Annotate": "block_or_loop", "Unannotate": "block_or_loop"}


def _args(inst: Instruction) -> list:
    ins = [x if isinstance(x, str) else _py(x) for x in inst.inputs]
    if inst.kind in ("Split", "LoopPartition"):
        return [f"loop={ins[0]}", f"factors=[{', '.join(ins[1:])}]"]
    if inst.kind in ("ComputeAt", "ReverseComputeAt", "DecomposeReduction"):
        return [f"block={ins[0]}", f"loop={ins[1]}"]
    if inst.kind == "FuseReductionEpilogue":
        return [f"reduction_block={ins[0]}", f"epilogue_block={ins[1]}"]
    if inst.kind in _FIRST and ins:
        return [f"{_FIRST[inst.kind]}={ins[0]}"]
    return ins


_TUPLES = {"buffer"}  # attrs TVM prints as a tuple: buffer=("read", 0)


def _py(v) -> str:
    if isinstance(v, tuple):
        return f"({', '.join(_py(x) for x in v)})"
    if isinstance(v, list):
        return f"[{', '.join(_py(x) for x in v)}]"
    return json.dumps(v) if isinstance(v, str) else repr(v)
