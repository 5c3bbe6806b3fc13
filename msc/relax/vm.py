"""``relax.vm`` as TVM's lessons of 2022 spell it: ``relax.vm.build`` and the VM class.

    ex = relax.vm.build(mod, target="llvm")          # the same as relax.build(mod, "llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
"""

from __future__ import annotations

__all__ = ["build"]  # and VirtualMachine, loaded on first use


def build(mod, target="llvm", params=None, **kwargs):
    """``relax.build`` under its old name."""
    from ..backend.build import build as _build

    return _build(mod, target, params, **kwargs)


def __getattr__(name):
    if name == "VirtualMachine":
        from ..backend.runtime.vm import VirtualMachine

        return VirtualMachine
    raise AttributeError(f"module 'msc.relax.vm' has no attribute {name!r}")
