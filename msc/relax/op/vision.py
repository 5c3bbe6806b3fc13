"""``relax.op.vision.*`` builders (generated from the op table)."""

from .registry import install

install(globals(), "vision")
