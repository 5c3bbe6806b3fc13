"""One import root: the repo's top-level frontends/, codegen/ and compression/ folders install
as msc.frontends, msc.codegen and msc.compression (metadata lives in pyproject.toml).

The folders stay where the design card puts them; only the installed names change, so the
distribution adds exactly one top-level name, ``msc``. Python 3.14's standard library has its own
``compression`` package and PyPI has a ``codegen``: neither can shadow, or be shadowed by, msc.
"""

from setuptools import find_packages, setup

ROOTS = ("frontends", "codegen", "compression")

setup(
    packages=find_packages(include=["msc", "msc.*"]) + [
        f"msc.{name}" for name in find_packages(include=[f"{r}{s}" for r in ROOTS
                                                          for s in ("", ".*")])],
    package_dir={"msc": "msc", **{f"msc.{root}": root for root in ROOTS}},
)
