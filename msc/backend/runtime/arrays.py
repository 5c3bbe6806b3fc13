"""Runtime values of the VM: devices, the NDArray result wrapper, and array import.

Inputs reach the VM as numpy arrays or as anything with ``__dlpack__`` (torch tensors); both
are imported without a copy. Results come back as :class:`NDArray`, which wraps a numpy array::

    dev = cpu()                              # Device("cpu", 0)
    out = vm["main"](torch.randn(1, 784))    # NDArray
    out.numpy(), out.shape, out.dtype        # the numpy array itself (no copy)

Non-contiguous inputs (a transposed view, a sliced torch tensor) are copied into a C-contiguous
array before native code runs: kernels read plain row-major memory, and misreading strides
would be silent. bfloat16 is represented by ``ml_dtypes.bfloat16`` when it is installed.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

import numpy as np

from ...errors import ShapeError

__all__ = ["Device", "NDArray", "cpu", "data_address", "device", "np_dtype", "to_numpy",
           "wrap_result"]


def _address_reader():
    """``f(array) -> its data address`` for exact ``np.ndarray`` objects, ~0.3 us where
    ``array.ctypes.data`` takes 1-3 us (it builds a ctypes helper object each time): the
    ``data`` pointer is the first field after the object header in numpy's array struct
    (``PyArrayObject_fields``, part of numpy's C ABI). Checked here against ``ctypes.data``
    on a few arrays (views, offsets, empty ones); any mismatch (another interpreter build or
    layout) keeps ``ctypes.data``."""
    read = ctypes.c_int64.from_address
    offset = object.__basicsize__  # the object header: refcount and type (16 bytes)

    def fast(a: np.ndarray) -> int:
        return read(id(a) + offset).value

    base = np.arange(64, dtype=np.float32)
    samples = [base, base[3:], base.reshape(8, 8)[2:, 1:], np.empty((0, 4)), np.zeros(5, np.int8)]
    if all(fast(a) == a.ctypes.data for a in samples):
        return fast
    return lambda a: a.ctypes.data


data_address = _address_reader()
"""``data_address(a)``: ``a.ctypes.data`` of an exact ``np.ndarray``, fast (never pass
anything else: the VM's generated code calls it on values it checked or made)."""


@dataclass(frozen=True)
class Device:
    """Where arrays live. Only the host CPU exists; ``device_type`` 1 is TVM's kDLCPU."""

    device_type_name: str = "cpu"
    device_id: int = 0

    @property
    def device_type(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"{self.device_type_name}({self.device_id})"

    def sync(self) -> None:
        """Nothing to wait for: kernels run synchronously on the calling thread."""


def cpu(dev_id: int = 0) -> Device:
    """The host CPU, as ``tvm.cpu()``."""
    return Device("cpu", int(dev_id))


def device(name: str = "cpu", dev_id: int = 0) -> Device:
    if name not in ("cpu", "llvm"):
        raise ShapeError(f"unsupported device {name!r}", hint="msc runs on the host: cpu()")
    return cpu(dev_id)


@cache
def np_dtype(dtype: str) -> np.dtype:
    """numpy dtype of a Relax dtype name ("bfloat16" needs ml_dtypes)."""
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ShapeError("bfloat16 needs the ml_dtypes package",
                             hint="pip install ml_dtypes") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype("bool" if dtype == "bool" else dtype)


def relax_dtype(dtype: np.dtype) -> str:
    return "bfloat16" if dtype.name == "bfloat16" else dtype.name


class NDArray:
    """A result tensor: a thin wrapper around a numpy array (``.numpy()`` returns it as is).

    Results are allocated fresh for every call, so handing out the array itself is safe.
    """

    __slots__ = ("_array", "device")

    def __init__(self, array: np.ndarray, dev: Device | None = None):
        self._array = array
        self.device = dev or cpu()

    def numpy(self) -> np.ndarray:
        return self._array

    asnumpy = numpy

    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def dtype(self) -> str:
        return relax_dtype(self._array.dtype)

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return f"<msc.NDArray shape={self.shape} dtype={self.dtype}>\n{self._array}"


def wrap_result(value, dev: Device | None = None):
    """Tensors -> NDArray, tuples -> tuples of wrapped fields; shapes and scalars as they are."""
    if isinstance(value, np.ndarray):
        return NDArray(value, dev)
    if isinstance(value, tuple) and not _is_shape(value):
        return tuple(wrap_result(v, dev) for v in value)
    return value


def _is_shape(value: tuple) -> bool:
    return bool(value) and all(type(v) is int for v in value)


def to_numpy(value, param: str = "input", contiguous: bool = True) -> np.ndarray:
    """An input tensor as a C-contiguous numpy array, without a copy when it already is one.

    Accepts numpy arrays, :class:`NDArray`, and objects with ``__dlpack__`` (torch tensors,
    detached first when they require grad). Strided inputs are copied (documented), unless
    ``contiguous=False``: the VM checks shapes first, so a huge broadcast view is refused
    before its copy is allocated.
    """
    if type(value) is np.ndarray:
        if contiguous and not value.flags.c_contiguous:
            return np.ascontiguousarray(value)
        return value
    if isinstance(value, NDArray):
        return to_numpy(value.numpy(), param, contiguous)
    if isinstance(value, np.ndarray):  # subclasses (np.matrix, memmap): plain view
        return to_numpy(np.asarray(value).view(np.ndarray), param, contiguous)
    if hasattr(value, "__dlpack__"):
        return to_numpy(_from_dlpack(value, param), param, contiguous)
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    raise ShapeError(f"expected a numpy array or a tensor with __dlpack__, got "
                     f"{type(value).__name__}", param=param,
                     hint="pass np.asarray(x) or a torch tensor")


def _from_dlpack(value, param: str) -> np.ndarray:
    if getattr(value, "requires_grad", False):
        value = value.detach()
    if _is_torch_bfloat16(value):  # numpy's dlpack import has no bfloat16
        import torch

        return np.from_dlpack(value.view(torch.int16)).view(np_dtype("bfloat16"))
    try:
        return np.from_dlpack(value)
    except (BufferError, TypeError, RuntimeError) as exc:
        raise ShapeError(f"cannot import {type(value).__name__} through dlpack: {exc}",
                         param=param, hint="move it to the CPU, or pass a numpy array") from None


def _is_torch_bfloat16(value) -> bool:
    return type(value).__module__.startswith("torch") and str(
        getattr(value, "dtype", "")) == "torch.bfloat16"
