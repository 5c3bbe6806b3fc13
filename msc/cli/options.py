"""Arguments shared by several subcommands, each with its help text written once."""

from __future__ import annotations

import argparse
import math

from .inputs import make_inputs
from .specs import INFO_FORM, INPUT_FORM, parse_dims, parse_input, parse_input_info

MODEL_HELP = ("the model: an ONNX .onnx file, an MSCGraph .json (weights from a sibling "
              ".npz), a TVMScript .py (parsed, never executed), or a torch model "
              "file.py:factory (the file is executed; factory() returns an nn.Module; needs "
              "--input-info)")


def number_type(convert, accept, what: str):
    """An argparse type: ``convert(text)`` when ``accept`` takes it, else a usage error
    (exit 2) saying what was expected: ``number_type(int, lambda v: v >= 1, "...")``."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return parse


positive_int = number_type(int, lambda v: v >= 1, "a whole number >= 1")
# numpy refuses negative seeds; an endless --min-time would never end (nan is refused too)
seed = number_type(int, lambda v: v >= 0, "a whole number >= 0")
seconds = number_type(float, lambda v: 0 <= v < math.inf, "a finite number of seconds >= 0")


def thread_count(text: str) -> int:
    """An argparse type: 1 .. MAX_THREADS threads."""
    from ..backend.runtime.threads import MAX_THREADS

    value = positive_int(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{text!r} threads: at most {MAX_THREADS}")
    return value


def add_model(p, name: str = "model", help_text: str = MODEL_HELP) -> None:
    p.add_argument(name, metavar=name.upper(), help=help_text)


def add_input_info(p) -> None:
    p.add_argument("--input-info", action="append", metavar="SPEC",
                   help=f"input shapes of a torch model (required) or an ONNX model "
                        f"(overrides): {INFO_FORM}; repeat it, or separate with ';', one per "
                        "input in forward order")


def add_inputs(p) -> None:
    """--input / --dim / --seed: the data a model is run on."""
    add_input_info(p)
    p.add_argument("--input", action="append", metavar="SPEC", default=[],
                   help=f"an input: {INPUT_FORM}; the inputs not given are random "
                        "(floats in [0, 1), integers in [0, 10)) from --seed")
    p.add_argument("--dim", action="append", metavar="NAME=SIZE", default=[],
                   help="the size of a symbolic (named) dim, e.g. --dim N=2")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random inputs (default 0)")


def add_tolerances(p, atol: float = 1e-4, rtol: float = 1e-4) -> None:
    p.add_argument("--atol", type=float, default=atol,
                   help=f"absolute tolerance of the comparison (default {atol:g})")
    p.add_argument("--rtol", type=float, default=rtol,
                   help=f"relative tolerance: |msc - ref| <= atol + rtol * |ref| (default "
                        f"{rtol:g})")


def add_threads(p) -> None:
    p.add_argument("--threads", type=thread_count, default=None, metavar="N",
                   help="threads of msc's VM and of the reference runtime (default: theirs; "
                        "msc's is $MSC_NUM_THREADS, else every CPU this process may use)")


def model_inputs(args, model) -> dict:
    """The arrays to run ``model`` on: --input, --dim and --seed applied."""
    return make_inputs(model.graph, given_inputs(args), parse_dims(args.dim), args.seed,
                       model.source_names)


def input_info(args) -> list:
    return parse_input_info(getattr(args, "input_info", None))


def given_inputs(args) -> list:
    return [parse_input(spec) for spec in getattr(args, "input", None) or []]
