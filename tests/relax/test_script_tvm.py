"""TVM 0.27 compatibility, both directions.

The texts under tests/relax/data/tvm027/ are what TVM 0.27 printed for torch (from_fx,
from_exported_program) and ONNX models (tests/relax/data/tvm027/gen_tvm027.py); their constants
are in the .npz beside them, since TVM 0.27 cannot print its metadata section. These parse without
TVM. When tvm imports, TVM's own parser must accept what msc prints, and TVM must still print
what is stored.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msc import relax
from msc.relax.analysis import structural_equal

DATA = Path(__file__).parent / "data" / "tvm027"
SCRIPTS = Path(__file__).parent / "data" / "script"
NAMES = sorted(p.stem for p in DATA.glob("*.tvmscript"))


def tvm_text(name: str) -> str:
    return (DATA / f"{name}.tvmscript").read_text().rstrip("\n")


def tvm_metadata(name: str):
    path = DATA / f"{name}.npz"
    if not path.exists():
        return None
    with np.load(path) as data:
        return {"ir.GenericConst": [data[str(i)] for i in range(len(data.files))]}


def as_msc_prints(text: str) -> str:
    """TVM's text with msc's one deliberate difference: non-finite constants as float("inf")
    (TVM's own parser rejects its R.const("inf", ...))."""
    for value in ("-inf", "inf", "nan"):
        text = text.replace(f'R.const("{value}",', f'R.const(float("{value}"),')
    return text


@pytest.mark.parametrize("name", NAMES)
def test_tvm_text_parses_and_reprints_identically(name):
    mod = relax.from_script(tvm_text(name), metadata=tvm_metadata(name))
    assert mod.script() == as_msc_prints(tvm_text(name))


@pytest.mark.parametrize("name", NAMES)
def test_tvm_text_round_trips_with_metadata(name):
    mod = relax.from_script(tvm_text(name), metadata=tvm_metadata(name))
    again = relax.from_script(mod.script(show_meta=True))
    assert again.script(show_meta=True) == mod.script(show_meta=True)
    assert structural_equal(again, mod)


def test_frontends_are_covered():
    kinds = {name.split("_")[0] for name in NAMES}
    assert {"fx", "ep", "onnx", "legalized"} <= kinds
    assert any("TypeVar" in tvm_text(n) for n in NAMES)


# --------------------------------------------------------------------------------------------
# With TVM: its parser accepts msc's text; it still prints what is stored.

ACCEPT = r'''
import sys, json
import numpy as np
import tvm
from tvm import relax
from tvm.script.parser.core.entry import _default_globals
results = {}
for item in json.loads(sys.stdin.read()):
    extra = _default_globals()
    if item["npz"]:
        with np.load(item["npz"]) as d:
            consts = [relax.const(d[str(i)]) for i in range(len(d.files))]
        extra["metadata"] = {"ir.GenericConst": consts}
    try:
        mod = tvm.script.from_source(item["text"], extra_vars=extra)
        results[item["name"]] = "ok" if len(mod.functions) else "empty"
    except Exception as err:  # report, the test names the file
        results[item["name"]] = str(err)[-800:]
print(json.dumps(results))
'''


def _run_tvm(code: str, stdin: str = "", *args) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], input=stdin, text=True, check=False,
                          capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_tvm_parses_what_msc_prints():
    pytest.importorskip("tvm")

    items = []
    for name in NAMES:
        mod = relax.from_script(tvm_text(name), metadata=tvm_metadata(name))
        npz = DATA / f"{name}.npz"
        items.append({"name": name, "text": mod.script(), "npz": str(npz) if npz.exists()
                      else ""})
    for path in sorted(SCRIPTS.glob("*.tvmscript")):
        mod = relax.from_script(path.read_text())
        if "metadata" not in mod.script():
            items.append({"name": path.name, "text": mod.script(), "npz": ""})
    results = json.loads(_run_tvm(ACCEPT, json.dumps(items)))
    failed = {k: v for k, v in results.items() if v != "ok"}
    assert not failed, failed


@pytest.mark.parametrize("name", ["fx_cnn", "onnx_conv_dynamic", "legalized_mlp"])
def test_tvm_still_prints_the_stored_text(name, tmp_path):
    pytest.importorskip("tvm")
    pytest.importorskip("torch")
    code = (f"import sys, json; sys.path.insert(0, {str(DATA)!r}); import gen_tvm027 as g; "
            f"print(json.dumps(g.build({name!r}).script()))")
    assert json.loads(_run_tvm(code)) == tvm_text(name)
