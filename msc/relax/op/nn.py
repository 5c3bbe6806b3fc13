"""``relax.op.nn.*`` builders (generated from the op table)."""

from .registry import install

install(globals(), "nn")
