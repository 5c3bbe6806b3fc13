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
import hashlib
import struct

import numpy as np

from ...errors import BuildError
from .native_pool_ir import NATIVE_ARGS
from .threads import NativeTasks, native_address

__all__ = ["DIRECT", "At", "Buffer", "ChainEntry", "wrapped_tasks"]

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
    return sequence_ir(((sig, layout, 0),), buffers, prefix)


def sequence_ir(calls: tuple, buffers: int | None = None,
                prefix: str = "msc_chain_adapt_") -> tuple[str, str]:
    """(IR, symbol) of ``void adapt(i64 b0.., i64 row)`` making the calls ``(sig, layout,
    fn slot)`` in order: each calls the entry whose address is ``row[fn slot]``; its argument
    k is parameter i (``("buf", i)``), parameter i plus the byte offset ``row[j]`` (``("at", i,
    j)``: a part of a buffer) or ``row[j]`` (``("row", j)``). The code depends only on this
    structure, never on the row's values, so kernels of many shapes share one adapter."""
    reads = [entry[1] for _, layout, _ in calls for entry in layout if entry[0] != "row"]
    least = 1 + max(reads, default=-1)
    buffers = least if buffers is None else max(buffers, least)
    code = "" if buffers == least else f"n{buffers}_"  # the symbol says what it takes
    code += "_".join(f"f{slot}" + "".join(f"{_CODES[ty]}{kind[0]}{'.'.join(map(str, at))}"
                                         for (ty, _), (kind, *at) in zip(sig, layout))
                    for sig, layout, slot in calls)
    if len(code) > 96:  # a kernel's whole sequence (one call per image): a digest names it
        code = "h" + hashlib.sha256(code.encode()).hexdigest()[:24]
    name = f"{prefix}{code}"
    params = ", ".join([f"i64 %b{i}" for i in range(buffers)] + ["i64 %row"])
    lines = [f"define void @{name}({params}) {{", "entry:", "  %rp = inttoptr i64 %row to i64*"]
    for c, (sig, layout, slot) in enumerate(calls):
        lines += _row_load(f"fa{c}", slot)
        lines.append(f"  %fn{c} = inttoptr i64 %fa{c} to void "
                     f"({', '.join(ty for ty, _ in sig)})*")
        args = []
        for k, ((ty, how), (kind, *at)) in enumerate(zip(sig, layout)):
            tag = f"{c}_{k}"
            if kind == "buf":
                src = f"%b{at[0]}"
            elif kind == "row":
                lines += _row_load(f"v{tag}", at[0])
                src = f"%v{tag}"
            else:  # a buffer plus a byte offset from the row
                lines += _row_load(f"o{tag}", at[1])
                lines.append(f"  %v{tag} = add i64 %b{at[0]}, %o{tag}")
                src = f"%v{tag}"
            more, value = _arg(tag, ty, how, src)
            lines += more
            args.append(f"{ty} {value}")
        lines.append(f"  call void %fn{c}({', '.join(args)})")
    lines += ["  ret void", "}"]
    return "\n".join(lines) + "\n", name


def _row_load(name: str, slot: int) -> list:
    if slot == 0:
        return [f"  %{name} = load i64, i64* %rp"]
    return [f"  %p{name} = getelementptr inbounds i64, i64* %rp, i64 {slot}",
            f"  %{name} = load i64, i64* %p{name}"]


@functools.cache
def _adapter(calls: tuple, buffers: int | None = None) -> int:
    from ..llvm.jit import get_jit

    text, name = sequence_ir(calls, buffers)
    library = get_jit().compile(text, [name], name="msc_chain_adapt")
    _KEEP.append(library)
    return library.address(name)


class ChainEntry:
    """A kernel entry as a native chain step (runtime/native_run.KernelStep): ``args`` are
    the entry's arguments in order, each ``Buffer(i)`` (the step's i-th buffer: inputs,
    then outputs, then its scratch), ``At(i, byte offset)`` (a part of one) or a constant
    (int, pointer as int, float). :attr:`signature` is the (address, dims) pair a kernel's
    ``native_signature`` returns; the object keeps the constants' row alive, so the kernel
    must keep it. :meth:`sequence` makes one step of several entry calls (a conv's pad pass,
    its tiles and its transpose; one call per image)."""

    def __init__(self, cfunc, args):
        self._build(((cfunc, args),))

    @classmethod
    def sequence(cls, calls, buffers: int | None = None) -> ChainEntry:
        """One chain step calling each ``(cfunc, args)`` of ``calls`` in order. ``buffers``:
        the buffer parameters the entry takes (default: as many as the calls read), so that
        entries reading fewer share one task record layout (runtime/chain_split.py)."""
        entry = cls.__new__(cls)
        entry._build(tuple(calls), buffers)
        return entry

    def _build(self, calls: tuple, buffers: int | None = None) -> None:
        row, shapes = [], []
        for cfunc, args in calls:
            sig = _signature(cfunc)
            if len(args) != len(sig):
                raise BuildError(f"a chain step passes {len(args)} arguments, the entry "
                                 f"takes {len(sig)}", op="native_chain")
            fn_slot, layout = len(row), []
            row.append(native_address(cfunc))
            for value, (_, how) in zip(args, sig):
                if isinstance(value, At):
                    layout.append(("at", value.index, len(row)))
                    row.append(value.offset)
                elif isinstance(value, Buffer):
                    layout.append(("buf", value.index))
                else:
                    layout.append(("row", len(row)))
                    row.append(_bits(value, how))
            shapes.append((sig, tuple(layout), fn_slot))
        self.row = np.array(row, np.int64)
        self.signature = (_adapter(tuple(shapes), buffers), (self.row.ctypes.data,))


class Buffer(int):
    """An argument of :class:`ChainEntry` that is the step's buffer of this index."""

    @property
    def index(self) -> int:
        return int(self)


class At:
    """An argument of :class:`ChainEntry`: the step's buffer ``index`` plus ``offset``
    bytes (one image of a batch, one part of the scratch)."""

    __slots__ = ("index", "offset")

    def __init__(self, index: int, offset: int):
        self.index, self.offset = int(index), int(offset)
