"""Native task lists for kernels whose entry does not fit a task record.

A task record (threads.NativeTasks) holds a function address and NATIVE_ARGS (10) integer or
pointer arguments, passed in the registers every kernel entry reads them from. Entries that
take float arguments (an epilogue's scales) or more than ten arguments (the int8 GEMM driver
takes 19) used to split through ``parallel_for``, a Python callback per task (10-60 us per op
at two threads, and the tasks take turns on the GIL). :func:`wrapped_tasks` gives them a task
list too: each record calls a small generated wrapper ``wrap(x0..x8, extra)`` that passes
x0..x8 on as the entry's first nine arguments (so bases added from a record column work as
for any task) and reads the entry's address and the remaining arguments from the int64 row at
``extra``; each argument is converted to the entry's type there (truncated for int8 / int32,
bit-cast for float / double). One wrapper per signature, compiled once (kernel cache).
"""

from __future__ import annotations

import ctypes
import functools
import struct

import numpy as np

from ...errors import BuildError
from .native_pool_ir import NATIVE_ARGS
from .threads import NativeTasks, native_address

__all__ = ["DIRECT", "Buffer", "ChainEntry", "wrapped_tasks"]

DIRECT = NATIVE_ARGS - 1  # arguments a wrapped record passes in its own columns
# ctypes type -> (IR type, how an i64 becomes it, how a Python value becomes the i64)
_INT = ("i64", None)
_TYPES = {
    ctypes.c_void_p: _INT, ctypes.c_int64: _INT, ctypes.c_uint64: _INT,
    ctypes.c_int32: ("i32", "trunc"), ctypes.c_uint32: ("i32", "trunc"),
    ctypes.c_int16: ("i16", "trunc"), ctypes.c_int8: ("i8", "trunc"),
    ctypes.c_uint8: ("i8", "trunc"), ctypes.c_bool: ("i8", "trunc"),
    ctypes.c_float: ("float", "f32"), ctypes.c_double: ("double", "f64"),
}
_CODES = {"i64": "q", "i32": "i", "i16": "h", "i8": "b", "float": "f", "double": "d"}


def _signature(cfunc) -> tuple:
    argtypes = getattr(cfunc, "argtypes", None)
    if argtypes is None:
        raise BuildError("a wrapped task entry needs its ctypes argtypes", op="native_tasks")
    sig = []
    for t in argtypes:
        if t not in _TYPES and not (isinstance(t, type) and issubclass(t, ctypes._Pointer)):
            raise BuildError(f"no native task conversion for argument type {t.__name__}",
                             op="native_tasks", hint="pass integers, pointers or floats")
        sig.append(_TYPES.get(t, _INT))
    return tuple(sig)


def _bits(value, how) -> int:
    if how == "f32":
        return struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if how == "f64":
        return struct.unpack("<q", struct.pack("<d", float(value)))[0]
    return int(value)


def _arg(k: int, ty: str, how, src: str) -> tuple[list[str], str]:
    if how is None:
        return [], src
    if how == "trunc":
        return [f"  %c{k} = trunc i64 {src} to {ty}"], f"%c{k}"
    if how == "f32":
        return [f"  %t{k} = trunc i64 {src} to i32",
                f"  %c{k} = bitcast i32 %t{k} to float"], f"%c{k}"
    return [f"  %c{k} = bitcast i64 {src} to double"], f"%c{k}"


def wrapper_ir(sig: tuple) -> tuple[str, str]:
    """(IR text, symbol) of the wrapper for the entry signature ``sig`` ((IR type, how)...):
    arguments 0..8 from its own parameters, the rest from its argument row."""
    layout = tuple(("buf", k) if k < DIRECT else ("row", k - DIRECT + 1)
                   for k in range(len(sig)))
    return adapter_ir(sig, layout, DIRECT, "msc_task_wrap_")


@functools.cache
def _wrapper(sig: tuple) -> int:
    from ..llvm.jit import get_jit

    text, name = wrapper_ir(sig)
    library = get_jit().compile(text, [name], name="msc_task_wrap")
    _KEEP.append(library)
    return library.address(name)


_KEEP: list = []  # the wrapper libraries stay loaded for the process


def _needs_wrapper(sig: tuple) -> bool:
    return len(sig) > NATIVE_ARGS or any(how is not None for _, how in sig)


def wrapped_tasks(cfunc, rows) -> NativeTasks:
    """A task list calling ``cfunc(*row)`` for each of ``rows`` (ints, pointers as ints,
    floats where the entry takes them). Argument k (k < 9) sits in record column k + 1, so
    :meth:`NativeTasks.launch` can add bases to the first arguments as for any task. The
    entry must not fail (it returns nothing, as every task)."""
    sig = _signature(cfunc)
    rows = list(rows)
    for row in rows:
        if len(row) != len(sig):
            raise BuildError(f"a task row has {len(row)} arguments, the entry takes "
                             f"{len(sig)}", op="native_tasks")
    tasks = NativeTasks(len(rows))
    if not _needs_wrapper(sig):
        tasks.records[:, 0] = native_address(cfunc)
        for i, row in enumerate(rows):
            tasks.records[i, 1:1 + len(row)] = [int(v) for v in row]
        return tasks
    extra = np.zeros((len(rows), 1 + max(len(sig) - DIRECT, 0)), np.int64)
    extra[:, 0] = native_address(cfunc)
    tasks.records[:, 0] = _wrapper(sig)
    for i, row in enumerate(rows):
        bits = [_bits(v, how) for v, (_, how) in zip(row, sig)]
        tasks.records[i, 1:1 + min(len(bits), DIRECT)] = bits[:DIRECT]
        extra[i, 1:] = bits[DIRECT:]
        tasks.records[i, NATIVE_ARGS] = extra[i].ctypes.data
    tasks.keep = extra
    return tasks


# ---------------------------------------------------------------------------------------------
# Chain steps: the VM's native chains call a kernel entry as ``entry(buffers..., dims...)``
# (all i64, runtime/native_run.KernelStep). An entry whose arguments mix the buffers with
# constants (weights, sizes, floats) gets an adapter ``adapt(b0.., row)`` reading them from
# an int64 row.


def adapter_ir(sig: tuple, layout: tuple, buffers: int | None = None,
               prefix: str = "msc_chain_adapt_") -> tuple[str, str]:
    """(IR, symbol) of ``void adapt(i64 b0.., i64 row)`` calling the entry at ``row[0]``, of
    signature ``sig``, whose argument k is parameter i (``layout[k] = ("buf", i)``) or row
    slot j >= 1 (``("row", j)``); ``buffers`` parameters before the row (default: as many as
    the layout reads)."""
    if buffers is None:
        buffers = 1 + max((i for kind, i in layout if kind == "buf"), default=-1)
    code = "".join(f"{_CODES[ty]}{kind[0]}{i}" for (ty, _), (kind, i) in zip(sig, layout))
    name = f"{prefix}{code}"
    params = ", ".join([f"i64 %b{i}" for i in range(buffers)] + ["i64 %row"])
    lines = [f"define void @{name}({params}) {{", "entry:",
             "  %rp = inttoptr i64 %row to i64*", "  %fa = load i64, i64* %rp",
             f"  %fn = inttoptr i64 %fa to void ({', '.join(ty for ty, _ in sig)})*"]
    args = []
    for k, ((ty, how), (kind, i)) in enumerate(zip(sig, layout)):
        src = f"%b{i}"
        if kind == "row":
            lines += [f"  %p{k} = getelementptr inbounds i64, i64* %rp, i64 {i}",
                      f"  %v{k} = load i64, i64* %p{k}"]
            src = f"%v{k}"
        more, value = _arg(k, ty, how, src)
        lines += more
        args.append(f"{ty} {value}")
    lines += [f"  call void %fn({', '.join(args)})", "  ret void", "}"]
    return "\n".join(lines) + "\n", name


@functools.cache
def _adapter(sig: tuple, layout: tuple) -> int:
    from ..llvm.jit import get_jit

    text, name = adapter_ir(sig, layout)
    library = get_jit().compile(text, [name], name="msc_chain_adapt")
    _KEEP.append(library)
    return library.address(name)


class ChainEntry:
    """A kernel entry as a native chain step (runtime/native_run.KernelStep): ``args`` are
    the entry's arguments in order, each ``Buffer(i)`` (the step's i-th buffer: inputs,
    then outputs) or a constant (int, pointer as int, float). :attr:`signature` is the
    (address, dims) pair a kernel's ``native_signature`` returns; the object keeps the
    constants' row alive, so the kernel must keep it."""

    def __init__(self, cfunc, args):
        sig = _signature(cfunc)
        if len(args) != len(sig):
            raise BuildError(f"a chain step passes {len(args)} arguments, the entry takes "
                             f"{len(sig)}", op="native_chain")
        layout, row = [], [native_address(cfunc)]
        for value, (_, how) in zip(args, sig):
            if isinstance(value, Buffer):
                layout.append(("buf", value.index))
            else:
                layout.append(("row", len(row)))
                row.append(_bits(value, how))
        self.row = np.array(row, np.int64)
        self.signature = (_adapter(sig, tuple(layout)), (self.row.ctypes.data,))


class Buffer(int):
    """An argument of :class:`ChainEntry` that is the step's buffer of this index."""

    @property
    def index(self) -> int:
        return int(self)
