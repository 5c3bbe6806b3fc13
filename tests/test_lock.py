"""The lock is what CI tested: every dependency pinned exactly, and installed at its pin."""

import os
import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"


def _pins() -> dict[str, str]:
    """name -> version of the lock's lines whose marker holds for this interpreter."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        if not line or line.startswith((" ", "#")):
            continue
        spec, _, marker = line.partition(";")
        name, version = spec.strip().split("==")
        if not marker.strip() or Marker(marker.strip()).evaluate():
            assert canonicalize_name(name) not in pins, f"{name} pinned twice for this Python"
            pins[canonicalize_name(name)] = version
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"] + extras["test"] + extras["tvm"]]


def test_lock_pins_every_declared_dependency_exactly():
    pins = _pins()
    for req in _declared():
        if req.marker and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is declared in pyproject.toml but not locked: ./run lock"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"{req.name}=={pins[name]} in the lock does not satisfy {req} in pyproject.toml"
    assert "torch" in pins and pins["torch"] == "2.13.0"
    assert not any(re.match(r"nvidia-|cuda-|triton$", n) for n in pins), "CUDA packages locked"


@pytest.mark.skipif(os.environ.get("MSC_UNLOCKED") == "1",
                    reason="./run test-latest tests the newest releases, not the lock")
def test_installed_versions_are_the_locked_ones():
    """A fresh machine gets the versions this suite ran with (torch's local label aside)."""
    drift = {}
    for name, version in _pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a platform-only package (colorama on Windows, ...)
        if installed.split("+")[0] != version:
            drift[name] = (version, installed)
    assert not drift, f"installed versions differ from requirements/lock.txt: {drift}; ./run setup"
