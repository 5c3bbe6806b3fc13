"""Load a model given on the command line into an MSCGraph (+ weights).

``load_model(spec) -> (graph, weights)`` is what every subcommand calls; ``open_model`` also
keeps what the reference runtimes need (the ONNX file, the torch module). The reader is chosen
by the spec:

=======================  =======================================================================
``net.json``             MSCGraph JSON; weights from a sibling ``net.npz`` / ``net.safetensors``
``net.onnx``             ONNX (``--input-info`` may override input shapes, by name)
``net.py`` (no suffix)   TVMScript text: parsed with ``ast``, **never executed**
``net.py:factory``       a torch model: the file **is executed** (it is the user's own code) and
                         ``factory()`` must return an ``nn.Module``; ``--input-info`` is required
=======================  =======================================================================

The two ``.py`` paths are told apart by the ``:factory`` suffix alone, so a TVMScript file can
never be executed by accident.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import MSCError, SerializationError, ValidationError
from ..graph.files import with_context

__all__ = ["Model", "load_graph", "load_model", "load_torch_module", "open_model",
           "split_torch_spec"]

_TORCH_SPEC = re.compile(r"(?P<path>.+\.py):(?P<factory>[A-Za-z_][A-Za-z0-9_]*)")
_MODULES = itertools.count()


@dataclass
class Model:
    """A loaded model: its graph and weights, and where they came from."""

    spec: str
    path: str
    kind: str  # "json", "onnx", "tvmscript" or "torch" (see LOADERS)
    graph: Any
    weights: dict
    module: Any = None  # the torch nn.Module of a torch model (the --check reference)
    input_info: list = field(default_factory=list)
    names: list | None = None  # see source_names

    @property
    def source_names(self) -> list[str]:
        """The inputs' names in the source model (ONNX names such as ``input.1``, which the
        graph sanitizes to ``input_1``; torch --input-info names); --input accepts these too.
        Read on first use: inspect, export and diff never need them."""
        if self.names is None:
            self.names = _onnx_input_names(self.path) if self.kind == "onnx" else []
        return self.names


def _from_json(path: str, input_info):
    from msc.codegen.weight_files import load_weights

    from ..graph import MSCGraph

    graph = MSCGraph.from_json(path)
    stem = os.path.splitext(path)[0]
    for ext in (".npz", ".safetensors"):
        if os.path.exists(stem + ext):
            return graph, load_weights(stem + ext)
    return graph, {}


def _from_onnx(path: str, input_info):
    from msc.frontends.translate import from_onnx

    info = {name: (dims, dtype) for name, dims, dtype in input_info} or None
    return from_onnx(path, input_info=info)


def _from_tvmscript(path: str, input_info):
    from msc.frontends.translate import from_relax

    from ..relax import from_script

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise SerializationError(f"not UTF-8 text (byte {e.start})", file=path,
                                 hint="TVMScript files are UTF-8 Python source") from None
    return from_relax(from_script(text, filename=path))  # parse errors name the file


# Readers by file extension: MSCGraph JSON, ONNX, TVMScript text (parsed, never executed).
LOADERS = {".json": _from_json, ".onnx": _from_onnx, ".py": _from_tvmscript,
           ".tvmscript": _from_tvmscript}
KINDS = {".json": "json", ".onnx": "onnx", ".py": "tvmscript", ".tvmscript": "tvmscript"}
# The readers that take --input-info; the others carry their shapes in the file.
TAKES_INPUT_INFO = {"onnx", "torch"}


def split_torch_spec(spec: str) -> tuple[str, str] | None:
    """``"net.py:make"`` -> ``("net.py", "make")``; None for any other spec."""
    match = _TORCH_SPEC.fullmatch(spec)
    return (match["path"], match["factory"]) if match else None


def _check_file(path: str) -> None:
    if not os.path.exists(path):
        raise SerializationError("no such file", file=path, hint="check the model path")
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise SerializationError("not a readable file", file=path)


def open_model(spec: str, input_info: list | None = None) -> Model:
    """The model named by ``spec`` (see the module docstring); bad input is a typed MSC error.

    ``input_info``: ``[(name, dims, dtype)]`` from ``specs.parse_input_info``.
    """
    input_info = list(input_info or [])
    torch_spec = split_torch_spec(spec)
    if torch_spec:
        return _open_torch(spec, *torch_spec, input_info)
    _check_file(spec)
    ext = os.path.splitext(spec)[1].lower()
    if ext not in LOADERS:
        raise SerializationError(f"unsupported model format {ext or '(none)'!r}", file=spec,
                                 hint=f"supported: {', '.join(LOADERS)}, or file.py:factory "
                                      "for a torch model")
    kind = KINDS[ext]
    if input_info and kind not in TAKES_INPUT_INFO:
        raise ValidationError(f"--input-info applies to ONNX and torch models, not {ext} files",
                              file=spec, hint="the shapes of this model are in its file")
    with _naming(spec):
        graph, weights = LOADERS[ext](spec, input_info)
    return Model(spec, spec, kind, graph, weights, input_info=input_info)


def _onnx_input_names(path: str) -> list[str]:
    """The ONNX graph inputs that are not initializers, in order (the file is known good)."""
    import onnx

    proto = onnx.load(path, load_external_data=False)
    constants = {i.name for i in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in constants]


@contextlib.contextmanager
def _naming(path: str):
    """Errors raised while reading a model name its file (an unsupported op, a bad shape)."""
    try:
        yield
    except MSCError as err:
        if "file" in err.context:
            raise
        raise with_context(err, file=path) from err


def load_model(spec: str, input_info: list | None = None):
    """``(graph, weights)`` of a model; a missing or unknown file is a SerializationError."""
    model = open_model(spec, input_info)
    return model.graph, model.weights


def load_graph(spec: str):
    return load_model(spec)[0]


# ---------------------------------------------------------------------------------------------
# torch models: path/to/file.py:factory (the user's own code, executed on purpose)


def _open_torch(spec: str, path: str, factory: str, input_info: list) -> Model:
    from msc.frontends.translate import from_torch

    _check_file(path)
    if not input_info:
        raise ValidationError("a torch model needs --input-info", file=spec,
                              hint='pass --input-info "x:1,3,224,224:float32" (one per forward '
                                   'argument, in order; a named dim is dynamic)')
    module = _call_factory(path, factory)
    with _naming(spec):
        graph, weights = from_torch(module, [(dims, dtype) for _, dims, dtype in input_info])
    for tensor, (name, _, _) in zip(graph.get_inputs(), input_info):
        graph.set_tensor_alias(tensor, name)  # --input and baselines use the user's names
    return Model(spec, path, "torch", graph, weights, module=module, input_info=input_info,
                 names=[name for name, _, _ in input_info])


def load_torch_module(spec: str):
    """The ``nn.Module`` that ``file.py:factory`` returns (eval mode), for commands that
    import it their own way (``msc generate``)."""
    torch_spec = split_torch_spec(spec)
    if torch_spec is None:
        raise ValidationError(f"{spec!r} is not file.py:factory", file=spec,
                              hint="name a Python file and the function in it that returns "
                                   "the model, e.g. lm.py:make_model")
    _check_file(torch_spec[0])
    return _call_factory(*torch_spec)


def _call_factory(path: str, factory: str):
    from torch import nn

    source = _exec_file(path)
    fn = getattr(source, factory, None)
    if not callable(fn):
        defined = sorted(k for k, v in vars(source).items() if callable(v) and k[:1] != "_")
        raise SerializationError(f"the file defines no function {factory!r}", file=path,
                                 hint=f"callables in the file: {', '.join(defined) or 'none'}")
    try:
        module = fn()
    except Exception as err:  # the user's code: any failure is an input error naming it
        raise SerializationError(f"{factory}() failed: {type(err).__name__}: {err}",
                                 file=path) from err
    if not isinstance(module, nn.Module):
        raise SerializationError(f"{factory}() returned {type(module).__name__}, not a "
                                 "torch.nn.Module", file=path, hint="return the model instance")
    return module.eval()


def _exec_file(path: str):
    folder = os.path.dirname(os.path.abspath(path))
    name = f"msc_user_model_{next(_MODULES)}"
    spec = importlib.util.spec_from_file_location(name, path)
    source = importlib.util.module_from_spec(spec)
    # registered like an import: dataclasses, pickling and tracing look modules up by name
    sys.modules[name] = source
    sys.path.insert(0, folder)  # the model file may import its neighbours
    try:
        spec.loader.exec_module(source)
    except (Exception, SystemExit) as err:
        del sys.modules[name]
        raise SerializationError(f"running the model file failed: {type(err).__name__}: {err}",
                                 file=path) from err
    finally:
        sys.path.remove(folder)
    return source
