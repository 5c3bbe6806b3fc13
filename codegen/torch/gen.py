"""MSCGraph -> ``torch.nn.Module`` source (+ weights + standalone test).

Each joint is written by its op's "torch" row (``codegen/torch/table.py``): a layer in
``__init__`` where torch has a module for it (``nn.Conv2d(...)``, ``nn.Linear(...)``,
``nn.BatchNorm2d(...)``) and the graph holds its weights, a functional call otherwise. The
state dict uses the weight aliases (the original torch ``state_dict`` keys when the graph came
from torch) wherever they fit, and the weights go to ``.safetensors`` (``.npz`` without the
safetensors package)::

    model = to_torch(graph, weights, build_folder="out/torch")   # out/torch/main.py
    model(torch.rand(1, 3, 10, 10))
"""

from __future__ import annotations

import builtins
import os
import re
import tempfile
from pathlib import Path

import numpy as np
from torch import nn

from msc.errors import UnsupportedOpError, ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.graph.files import write_atomic
from msc.relax.op.facts import load_facts
from msc.relax.op.registry import OPS

from ..baseline import baseline_keys, read_config, write_manifest
from ..files import load_script, save_npz, script_stem, write_binary_atomic
from ..joint import JointContext, find_weight, joint_comment, shape_dims, write_nodes
from ..naming import Namer, comment, identifier, literal
from ..prims import PrimRenderer
from ..templates import test_section

__all__ = ["TorchContext", "TorchWriter", "to_torch"]

_RESERVED = set(dir(builtins)) | {"torch", "nn", "F", "np", "os", "sys", "math", "self",
                                  "HERE", "WEIGHTS", "BASELINE", "INPUTS", "OUTPUTS", "ATOL",
                                  "RTOL", "compare", "load_baseline", "load_model", "run",
                                  "main", "read_safetensors", "load_state"}
_DOTTED_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def torch_dtype(dtype: str) -> str:
    """``"float32"`` -> ``"torch.float32"`` (dtype names are validated by MSCTensor)."""
    return "torch." + identifier(dtype)


class TorchContext(JointContext):
    """What a torch row sees: the joint's typed attrs and the source of its values."""

    def __init__(self, writer: TorchWriter, node: MSCJoint):
        super().__init__(writer.graph, node)
        self.writer = writer

    # ---- values --------------------------------------------------------------------------
    def input(self, i: int) -> str:
        return self.writer.ref(*self.node.producer_and_idx_of(i))

    @property
    def inputs(self) -> list[str]:
        return [self.input(i) for i in range(len(self.node.inputs))]

    def has_weight(self, role: str) -> bool:
        return role in self.node.weights

    def weight(self, role: str) -> str:
        """A weight used by a functional call: a parameter (or buffer) of the root module."""
        return self.writer.parameter(self.node.weight_at(role))

    def tensor_arg(self, name: str) -> str | None:
        """The op argument ``name`` as a tensor source (input or weight), or None."""
        for arg, source in zip(self.op_def.args, self.bind_args()):
            if arg.name == name and source is not None:
                return self.arg_source(source)
        return None

    def arg_source(self, source: tuple) -> str:
        kind, value = source
        if kind == "input":
            return self.input(value)
        if kind == "inputs":
            return "[" + ", ".join(self.input(i) for i in value) + "]"
        if kind == "weight":
            return self.weight(value)
        if kind == "output":
            return self.dims(self.out)
        return literal(value)

    def args(self) -> list[str]:
        """Every bound op argument, in order (defaults left out)."""
        return [self.arg_source(s) for s in self.bind_args() if s is not None]

    def layer(self, ctor: str, params: dict[str, str]) -> str:
        """Register ``self.<name> = <ctor>`` whose torch params load from the weight roles in
        ``params`` ({torch param: role}); returns ``self.<name>``."""
        return self.writer.layer(self.node, ctor, params)

    # ---- shapes --------------------------------------------------------------------------
    @property
    def out(self) -> MSCTensor:
        return self.node.output_at(0)

    def in_tensor(self, i: int = 0) -> MSCTensor:
        return self.node.input_at(i)

    def dims(self, tensor: MSCTensor) -> str:
        return PrimRenderer.source(self.writer.prims.dims(tensor))

    def dim(self, tensor: MSCTensor, i: int):
        return self.writer.prims.dim(tensor, i)

    def dtype(self, dtype: str | None = None) -> str:
        return torch_dtype(dtype or self.out.dtype)

    def fail(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(why, op=self.node.optype, node=self.name)


class TorchWriter:
    """Writes the nn.Module source of one graph."""

    def __init__(self, graph: MSCGraph, weights: dict | None = None):
        self.graph, self.weights = graph, weights
        self.namer = Namer(_RESERVED)  # forward locals
        self.attr_namer = Namer(_RESERVED | set(dir(nn.Module)))  # self.<attr>
        self.vars: dict[str, str] = {}
        self.tuple_nodes: set[str] = set()
        self.init: list[str] = []
        self.forward: list[str] = []
        self.state: dict[str, MSCTensor] = {}  # state_dict key -> weight tensor
        self.extra_state: dict[str, np.ndarray] = {}  # state the graph has no weight for
        self.param_of: dict[str, str] = {}  # weight name -> "self.<attr>"
        self.layer_of: dict[str, tuple[str, str]] = {}  # node -> (ref, ctor)
        self.uses_math = False
        self.prims = PrimRenderer(graph, self._shape_ref, "torch")

    def _shape_ref(self, producer: str, out_idx: int, dim: int) -> str:
        return f"{self.vars[producer]}.shape[{dim}]"

    def ref(self, node: MSCJoint, idx: int) -> str:
        var = self.vars[node.name]
        return f"{var}[{idx}]" if node.name in self.tuple_nodes else var

    # ---- state ---------------------------------------------------------------------------
    def _attr_name(self, alias: str, fallback: str) -> str:
        """The alias itself when it is a free identifier (so state_dict keys are the aliases)."""
        return (alias.isascii() and self.attr_namer.exact(alias)) or \
            self.attr_namer(fallback, "w")

    def temp(self, node: MSCJoint, expr: str) -> str:
        """Bind ``expr`` to a fresh local before the node's own line; returns the local."""
        var = self.namer(f"{node.name}_tmp", "tmp")
        self.forward.append(f"{var} = {expr}")
        return var

    def parameter(self, tensor: MSCTensor) -> str:
        if tensor.name not in self.param_of:
            attr = self._attr_name(tensor.alias, tensor.name)
            value = f"torch.zeros({literal(tensor.shape)}, dtype={torch_dtype(tensor.dtype)})"
            if tensor.dtype.startswith(("float", "bfloat")):
                self.init.append(f"self.{attr} = nn.Parameter({value})")
            else:
                self.init.append(f"self.register_buffer({literal(attr)}, {value})")
            self.state[attr] = tensor
            self.param_of[tensor.name] = f"self.{attr}"
        return self.param_of[tensor.name]

    def _scalar(self, tensor: MSCTensor) -> str:
        """A one-value constant (``x + 1.0``) written in place, so it is no state of the
        module (it is none of the original model either)."""
        if self.weights is None or tensor.get_size() != 1:
            return ""
        value = find_weight(self.weights, tensor).reshape(-1)[0].item()
        dtype = torch_dtype(tensor.dtype)
        if tensor.ndim == 0:
            return f"torch.tensor({literal(value)}, dtype={dtype})"
        return f"torch.full({literal(tuple(tensor.shape))}, {literal(value)}, dtype={dtype})"

    def layer(self, node: MSCJoint, ctor: str, params: dict[str, str]) -> str:
        shared = self.layer_of.get(node.shared_ref)
        if shared is not None and shared[1] == ctor:
            return shared[0]
        attr = self._attr_name(self._layer_alias(node, params), node.name)
        self.init.append(f"self.{attr} = {ctor}")
        for param, role in params.items():
            self.state[f"{attr}.{param}"] = node.weight_at(role)
        self.layer_of[node.name] = (f"self.{attr}", ctor)
        return f"self.{attr}"

    @staticmethod
    def _layer_alias(node: MSCJoint, params: dict[str, str]) -> str:
        """``conv1`` when the weights' aliases are ``conv1.weight``, ``conv1.bias``..."""
        prefixes = set()
        for param, role in params.items():
            alias = node.weight_at(role).alias
            if not _DOTTED_IDENT.fullmatch(alias) or not alias.endswith("." + param):
                return ""
            prefixes.add(alias[: -len(param) - 1])
        return prefixes.pop() if len(prefixes) == 1 else ""

    # ---- joints --------------------------------------------------------------------------
    def write(self) -> None:
        load_facts("torch")
        for name in self.graph.input_names:
            node = self.graph.find_producer(name)
            self.vars[node.name] = self.namer(node.name, "inp")
        write_nodes(self.graph, self._node, self.vars, "the torch codegen",
                    "runtime ops (OpDef.runtime) have no torch row; fix or remove these nodes")

    def _node(self, node: MSCJoint) -> None:
        if node.optype == "input":
            return
        if node.optype == "constant":
            tensor = node.weight_at("const")
            scalar = self._scalar(tensor)
            self.vars[node.name] = scalar if scalar else self.parameter(tensor)
            return
        self.forward.append(f"# {joint_comment(node)}")
        if node.optype == "get_item":
            return self._get_item(node)
        expr = self._expr(node)
        if node.optype == "tuple" or len(node.outputs) > 1:
            self.tuple_nodes.add(node.name)
        var = self.namer(node.name, "x")
        self.forward.append(f"{var} = {expr}")
        self.vars[node.name] = var

    def _get_item(self, node: MSCJoint) -> None:
        index = JointContext(self.graph, node).raw("index", "int", 0)
        producer, _ = node.producer_and_idx_of(0)
        if producer.name in self.tuple_nodes:
            var = self.namer(node.name, "x")
            self.forward.append(f"{var} = {self.vars[producer.name]}[{index}]")
            self.vars[node.name] = var
            return
        ctx = TorchContext(self, node)
        self.vars[node.name] = ctx.input(min(index, len(node.inputs) - 1))

    def _expr(self, node: MSCJoint) -> str:
        if node.optype == "shape":  # a shape read (x.shape, x.size())
            dims = PrimRenderer.source(shape_dims(node, self.prims))
            return f"torch.tensor({dims}, dtype=torch.{identifier(node.outputs[0].dtype)})"
        ctx = TorchContext(self, node)
        if node.optype == "tuple":
            return "(" + "".join(f"{s}, " for s in ctx.inputs).rstrip(" ") + ")"
        op_def = OPS.get(node.optype)
        row = op_def.facts.get("torch") if op_def is not None else None
        if row is None:
            raise UnsupportedOpError(f"no torch row for {node.optype!r}", node=node.name)
        return row.render(ctx)

    # ---- the script ----------------------------------------------------------------------
    def outputs(self) -> list[str]:
        refs = []
        for name in self.graph.output_names:
            host, _, idx = self.graph.find_tensor(name).name.rpartition(":")
            node = self.graph.find_node(host)
            ref = self.ref(node, int(idx))
            # A constant output is the nn.Parameter itself: return a tensor, as the model did.
            is_param = node.optype == "constant" and ref.startswith("self.")
            refs.append(f"{ref}.detach()" if is_param else ref)
        return refs

    def source(self, script: str, class_name: str, weights_file: str, test: str) -> str:
        inputs = [self.vars[self.graph.find_producer(n).name] for n in self.graph.input_names]
        body = self.forward + ["return " + ", ".join(self.outputs())]
        text = "\n".join(self.forward)
        fields = {
            "script": script, "graph": comment(self.graph.name), "cls": class_name,
            "sys": "import sys\n" if test else "",
            "math": "import math\n" if "math." in text else "",
            "init": "\n".join("        " + line for line in self.init) or "        pass",
            "args": ", ".join(["self", *inputs]),
            "forward": "\n".join("        " + line for line in body),
            "weights_file": literal(weights_file),
        }
        return _SCRIPT.format(**fields) + test


_SCRIPT = '''"""torch.nn.Module generated by msc codegen.

load_model() returns the module with its weights; `python {script}` runs it in eager mode and
checks it against baseline/ (inputs and golden outputs).
"""
# graph: {graph}
import json
{math}import os
{sys}
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, {weights_file})


class {cls}(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward({args}):
{forward}


_SAFETENSORS_DTYPES = {{"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                       "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
                       "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                       "BOOL": torch.bool}}


def read_safetensors(path):
    """A .safetensors file as {{key: tensor}} (no safetensors package needed)."""
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
        data = handle.read()
    state = {{}}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _SAFETENSORS_DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin \\
            else torch.zeros(0, dtype=dtype)
        state[key] = flat.reshape(info["shape"])
    return state


def load_state(path=WEIGHTS):
    """The saved state dict ({{}} when there is none)."""
    if not os.path.exists(path):
        return {{}}
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    with np.load(path, allow_pickle=False) as data:
        return {{k: torch.from_numpy(data[k].copy()) for k in data.files}}


def load_weights(model, state):
    """model.load_state_dict(state) (strict) in one pass over the keys: torch's own filters
    the whole state for every submodule, which is quadratic in the layers."""
    own = model.state_dict(keep_vars=True)
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise RuntimeError(f"the weights do not fit {{type(model).__name__}}: missing keys "
                           f"{{missing[:5]}}, unexpected keys {{unexpected[:5]}}")
    with torch.no_grad():
        for key, value in state.items():
            if own[key].shape != value.shape:
                raise RuntimeError(f"weight {{key}} has shape {{list(value.shape)}}, the "
                                   f"module expects {{list(own[key].shape)}}")
            own[key].copy_(value)


def load_model(path=WEIGHTS):
    """The module in eval mode, with the saved weights when there are any."""
    model = {cls}()
    state = load_state(path)
    if state:
        load_weights(model, state)
    return model.eval()


def run(inputs):
    """Run the model eagerly on numpy inputs; the outputs as numpy arrays."""
    model = load_model()
    with torch.no_grad():
        result = model(*[torch.from_numpy(np.asarray(x, order="C")) for x in inputs])
    result = result if isinstance(result, (tuple, list)) else [result]
    return [r.numpy() if isinstance(r, torch.Tensor) else np.asarray(r) for r in result]
'''


# --------------------------------------------------------------------------------------------
# Weights.

def _state_arrays(writer: TorchWriter, weights: dict) -> dict:
    arrays = {}
    for key, tensor in writer.state.items():
        value = find_weight(weights, tensor)
        if list(value.shape) != tensor.shape and value.size == tensor.get_size():
            value = value.reshape(tensor.shape)
        if list(value.shape) != tensor.shape:
            raise ValidationError(f"weight data has shape {list(value.shape)}, expected "
                                  f"{tensor.shape}", tensor=tensor.name)
        arrays[key] = np.asarray(value.astype(tensor.dtype, copy=False), order="C")
    return {**arrays, **writer.extra_state}


def _save_weights(folder: Path, stem: str, arrays: dict) -> str:
    try:
        from safetensors.numpy import save_file
    except ImportError:
        save_file = None
    if save_file is None:
        name = f"{stem}_weights.npz"
        save_npz(folder / name, arrays)
        return name
    name = f"{stem}_weights.safetensors"
    write_binary_atomic(folder / name, lambda tmp: save_file(arrays, tmp))
    return name


def _weights_file(stem: str) -> str:
    try:
        import safetensors  # noqa: F401
    except ImportError:
        return f"{stem}_weights.npz"
    return f"{stem}_weights.safetensors"


def to_torch(graph: MSCGraph, weights: dict | None = None, codegen_config: dict | None = None,
             build_folder: str | os.PathLike | None = None):
    """Write ``<graph>.py`` (an nn.Module) and its weights into ``build_folder``; return the
    module (in eval mode, weights loaded when given).

    >>> model = to_torch(graph, weights, build_folder="out/torch")   # doctest: +SKIP
    """
    config = read_config(codegen_config)
    folder = Path(build_folder or tempfile.mkdtemp(prefix="msc_codegen_"))
    writer = TorchWriter(graph, weights)
    writer.write()
    stem = script_stem(graph.name)
    script, class_name = f"{stem}.py", _class_name(graph.name)
    weights_file = _weights_file(stem)
    inputs, outputs = baseline_keys(graph.get_inputs()), baseline_keys(graph.get_outputs())
    test = test_section(script, inputs, outputs, config["atol"], config["rtol"]) \
        if config["need_test"] else ""
    source = writer.source(script, class_name, weights_file, test)
    for old in (f"{stem}_weights.npz", f"{stem}_weights.safetensors"):
        if (folder / old).exists():
            os.unlink(folder / old)
    if weights is not None and writer.state:
        _save_weights(folder, stem, _state_arrays(writer, weights))
    write_atomic(folder / script, source)
    write_manifest(folder, script, inputs, outputs, "torch")
    return load_script(folder / script).load_model()


def _class_name(name: str) -> str:
    words = [w for w in identifier(name, "model").split("_") if w]
    cls = "".join(w[:1].upper() + w[1:] for w in words) or "Model"
    return Namer(_RESERVED)(cls if not cls[0].isdigit() else f"M{cls}", "Model")

