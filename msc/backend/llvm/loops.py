"""Control-flow helpers for kernel builders written with ``llvmlite.ir``.

Kernels are loop nests; these context managers hide the blocks, branches and phi nodes so a
builder reads like the loop it emits::

    with for_range(builder, n) as i:          # for (i = 0; i < n; ++i)
        ...
    with for_range(builder, k, step=KC) as pc:
        ...

Loop-carried values go through ``entry_alloca`` slots rather than hand-built phis: LLVM's
SROA/mem2reg promotes them back to registers at O3, and builders stay short.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llvmlite import ir

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F32_PTR = F32.as_pointer()


def const64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def as_value(ty: ir.Type, value) -> ir.Value:
    """Python ints become constants of the loop's index type; IR values pass through."""
    return value if isinstance(value, ir.Value) else ir.Constant(ty, value)


@contextmanager
def for_range(builder: ir.IRBuilder, stop, start=0, step=1, name: str = "i") -> Iterator[ir.Value]:
    """``for (i = start; i < stop; i += step)`` with a signed compare; yields ``i``.

    ``step`` must be positive. The body may add blocks; the latch is appended wherever the body
    left the builder, so nested loops compose.
    """
    ty = stop.type if isinstance(stop, ir.Value) else I64
    start, stop, step = (as_value(ty, v) for v in (start, stop, step))
    pre = builder.block
    cond = builder.append_basic_block(f"{name}.cond")
    body = builder.append_basic_block(f"{name}.body")
    end = builder.append_basic_block(f"{name}.end")
    builder.branch(cond)
    builder.position_at_end(cond)
    index = builder.phi(ty, name=name)
    index.add_incoming(start, pre)
    builder.cbranch(builder.icmp_signed("<", index, stop), body, end)
    builder.position_at_end(body)
    yield index
    index.add_incoming(builder.add(index, step, name=f"{name}.next", flags=("nsw",)), builder.block)
    builder.branch(cond)
    builder.position_at_end(end)


def entry_alloca(builder: ir.IRBuilder, ty: ir.Type, name: str = "") -> ir.AllocaInstr:
    """A stack slot in the entry block, where mem2reg looks for promotable slots."""
    with builder.goto_entry_block():
        builder.position_at_start(builder.function.entry_basic_block)
        return builder.alloca(ty, name=name)


def imin(builder: ir.IRBuilder, a: ir.Value, b) -> ir.Value:
    b = as_value(a.type, b)
    return builder.select(builder.icmp_signed("<", a, b), a, b)


def ceil_div(builder: ir.IRBuilder, a: ir.Value, b: int) -> ir.Value:
    return builder.sdiv(builder.add(a, as_value(a.type, b - 1)), as_value(a.type, b))


def switch_cases(builder: ir.IRBuilder, value: ir.Value, cases: dict) -> None:
    """``switch (value)`` over int cases; each case emits its code via a thunk, no default."""
    done = builder.append_basic_block("switch.end")
    switch = builder.switch(value, done)
    for case, emit in cases.items():
        block = builder.append_basic_block(f"case{case}")
        switch.add_case(ir.Constant(value.type, case), block)
        builder.position_at_end(block)
        emit()
        builder.branch(done)
    builder.position_at_end(done)
