"""``relax.op.image.*`` builders (generated from the op table)."""

from .registry import install

install(globals(), "image")
