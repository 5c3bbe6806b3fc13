"""The input arrays of ``msc run`` / ``bench`` / ``codegen --test``: given, or random.

    arrays = make_inputs(graph, [("x", ([2, 3, 16, 16], None))], dims={"N": 2}, seed=0)
    # -> {"x": float32 array (2, 3, 16, 16)}, keyed by input alias, in the graph's input order

An input is given as an array (``--input x:file.npy``) or a shape (``--input x:2,3,16,16``);
every other input is random from ``seed``. Symbolic (named) dims take their value from
``--dim``, from a given input that has them, or fail with a ShapeError naming the dim.
Random data: floats uniform in [0, 1), integers in [0, 10), booleans fair coins.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, ValidationError

__all__ = ["make_inputs", "random_array"]

INT_HIGH = 10  # random integer inputs (indices, ids) stay small so they index most tables
# Random inputs above this many bytes are refused before numpy tries (--dim N=10**12 is a
# typo, not a request for a petabyte).
MAX_RANDOM_BYTES = 4 << 30


def random_array(rng: np.random.Generator, shape: list[int], dtype: str) -> np.ndarray:
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        return rng.integers(0, INT_HIGH, shape).astype(dtype)
    return rng.random(shape).astype(dtype)


def _by_name(graph, given: list, source_names: list) -> dict:
    """``{input alias: value}`` of the user's inputs (named by alias, tensor name or the name in
    the source model)."""
    tensors = graph.get_inputs()
    lookup = {t.alias or t.name: t for t in tensors} | {t.name: t for t in tensors}
    lookup |= dict(zip(source_names, tensors))
    found = {}
    for name, value in given:
        if name not in lookup:
            known = ", ".join(t.alias or t.name for t in tensors)
            raise ValidationError(f"the model has no input {name!r}", key="--input",
                                  hint=f"its inputs: {known}")
        found[lookup[name].alias or lookup[name].name] = value
    return found


def _bind(tensor, name: str, shape: list[int], dims: dict) -> None:
    """Check ``shape`` against the tensor's dims, binding its named dims into ``dims``."""
    want = tensor.get_shape(True)
    if len(shape) != len(want):
        raise ShapeError(f"got rank {len(shape)} {list(shape)}, the model wants {want}",
                         tensor=name, hint="give the input in the model's shape")
    for got, dim in zip(shape, want):
        if isinstance(dim, int) and dim >= 0 and got != dim:
            raise ShapeError(f"got shape {list(shape)}, the model wants {want}", tensor=name)
        if isinstance(dim, str) and dims.setdefault(dim, got) != got:
            raise ShapeError(f"dim {dim!r} is {dims[dim]} elsewhere, {got} here",
                             tensor=name, hint="a named dim has one value for all inputs")


def _resolve(tensor, name: str, dims: dict) -> list[int]:
    shape = []
    for dim in tensor.get_shape(True):
        if isinstance(dim, str):
            if dim not in dims:
                raise ShapeError(f"the symbolic dim {dim!r} needs a value", tensor=name,
                                 hint=f"pass --dim {dim}=<size> or --input {name}:<shape>")
            dim = dims[dim]
        elif dim < 0:
            raise ShapeError("has a dynamic dim with no name", tensor=name,
                             hint=f"pass --input {name}:<shape>")
        shape.append(dim)
    return shape


def _check_size(name: str, shape: list[int], dtype: str) -> None:
    try:
        size = np.dtype(dtype).itemsize
    except TypeError:  # msc dtypes numpy lacks (bfloat16, float8...)
        raise ShapeError(f"no random data of dtype {dtype}", tensor=name,
                         hint="pass the array: --input NAME:file.npy") from None
    for dim in shape:
        size *= dim
    if size > MAX_RANDOM_BYTES:
        raise ShapeError(f"a random input of shape {list(shape)} {dtype} would take "
                         f"{size / 2**30:.3g} GiB (the limit is {MAX_RANDOM_BYTES >> 30} GiB)",
                         tensor=name, hint="check the sizes given by --input / --dim, or "
                                           "pass the array: --input NAME:file.npy")


def make_inputs(graph, given: list | None = None, dims: dict | None = None, seed: int = 0,
                source_names: list | None = None) -> dict[str, np.ndarray]:
    """The arrays to feed ``graph``: ``given`` as ``[(name, array | (dims, dtype|None))]``;
    ``source_names``: the inputs' names in the source model, also accepted."""
    values, dims = _by_name(graph, given or [], source_names or []), dict(dims or {})
    tensors = {t.alias or t.name: t for t in graph.get_inputs()}
    for name, value in values.items():
        shape = value.shape if isinstance(value, np.ndarray) else value[0]
        _bind(tensors[name], name, list(shape), dims)
        if isinstance(value, np.ndarray) and str(value.dtype) != tensors[name].dtype:
            raise ShapeError(f"the array is {value.dtype}, the model wants "
                             f"{tensors[name].dtype}", tensor=name,
                             hint=f"save it with .astype('{tensors[name].dtype}')")
    rng, arrays = np.random.default_rng(seed), {}
    for name, tensor in tensors.items():
        value = values.get(name)
        if isinstance(value, np.ndarray):
            arrays[name] = value
            continue
        shape = _resolve(tensor, name, dims) if value is None else value[0]
        dtype = value[1] if value is not None and value[1] else tensor.dtype
        _check_size(name, shape, dtype)
        arrays[name] = random_array(rng, shape, dtype)
    return arrays
