"""One import root: the wheel installs ``msc`` and nothing else at the top of site-packages.

The repo keeps frontends/, codegen/ and compression/ at its top (the design card); setup.py
installs them as msc.frontends, msc.codegen and msc.compression. Python 3.14's standard library
has its own ``compression`` package, which comes before site-packages: a decoy of it stands
ahead of the installed wheel here, and msc's CLI must still prune and quantize.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cli_models import torch_file

ROOT = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the sources: setuptools writes build/ and *.egg-info
    next to them, and the checkout must stay as it is (other tests compare it)."""
    out, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT.parent / name, source / name)
    for name in ("msc", "frontends", "codegen", "compression"):
        shutil.copytree(ROOT.parent / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-q", "-w", str(out), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    (path,) = out.glob("msc-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed; msc's dependencies come from this interpreter's
    site-packages through a .pth line (after the venv's own, so the wheel's msc wins)."""
    env = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                    "--no-index", "--disable-pip-version-check", "-q", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    (site / "msc_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_wheel_has_one_top_level_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"msc"}
    for module in ("msc/frontends/translate.py", "msc/codegen/relax/gen.py",
                   "msc/compression/prune/__init__.py", "msc/data/conv_relu.json"):
        assert module in names, f"{module} is missing from the wheel"


def _run(python: Path, code: str, cwd: Path, **env) -> str:
    proc = subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True,
                          check=False,
                          timeout=300, env={**os.environ, "PYTHONPATH": "", **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_installed_wheel_imports_from_its_own_site_packages(installed, tmp_path):
    out = _run(installed, "import msc.frontends.translate as t, msc.codegen as c, "
                          "msc.compression as p, importlib.util as u; "
                          "print(t.__file__, c.__file__, p.__file__); "
                          "print([u.find_spec(n) for n in ('frontends', 'codegen')])", tmp_path)
    files, specs = out.splitlines()
    assert str(ROOT.parent) not in files and files.count("site-packages/msc/") == 3
    assert specs == "[None, None]"


def test_cli_prunes_and_quantizes_with_a_stdlib_style_compression_ahead(installed, tmp_path):
    decoy = tmp_path / "decoy" / "compression"  # Python 3.14's compression package (PEP 784)
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text('"""Stand-in for the standard library\'s compression."""\n')
    (decoy / "zstd.py").write_text("")
    spec = torch_file(tmp_path) + ":make_cnn"
    small, calib = tmp_path / "small.json", tmp_path / "calib.npz"
    np.savez(calib, x=np.random.default_rng(0).standard_normal((4, 3, 16, 16), np.float32))
    for argv in (["prune", spec, "--input-info", "x:1,3,16,16:float32", "--density", "0.5",
                  "--stride", "2", "--no-latency", "-o", str(small), "-q"],
                 ["quantize", str(small), "--calib", str(calib), "-o", str(tmp_path / "q.json"),
                  "-q"]):
        proc = subprocess.run([str(installed), "-m", "msc", *argv], cwd=tmp_path, check=False,
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(decoy.parent)})
        assert proc.returncode == 0, f"msc {argv[0]}: {proc.stderr[-3000:]}"
    assert small.exists() and (tmp_path / "q.json").exists()
    check = _run(installed, "import compression, msc.compression as m; "
                            "print(compression.__file__); print(m.__file__)",
                 tmp_path, PYTHONPATH=str(decoy.parent))
    assert check.splitlines()[0].startswith(str(decoy))
    assert "site-packages/msc/compression" in check.splitlines()[1]
