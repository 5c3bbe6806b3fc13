"""TVM 0.27 compatibility, both directions.

The texts under tests/relax/data/tvm027/ are what TVM 0.27 printed for torch (from_fx,
from_exported_program) and ONNX models (tests/relax/data/tvm027/gen_tvm027.py); their constants
are in the .npz beside them, since TVM 0.27 cannot print its metadata section. These parse without
TVM. When tvm imports, TVM's own parser must accept what msc prints, and TVM must still print
what is stored.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msc import relax
from msc.relax.analysis import structural_equal
from tests.helpers.torch_tools import run_vm

DATA = Path(__file__).parent / "data" / "tvm027"
SCRIPTS = Path(__file__).parent / "data" / "script"
NAMES = sorted(p.stem for p in DATA.glob("*.tvmscript"))
# What TVM 0.27 printed with show_meta=True (it crashes on modules with ir.GenericConst).
META_NAMES = sorted(p.stem for p in DATA.glob("*.tvmmeta"))


def tvm_text(name: str) -> str:
    return (DATA / f"{name}.tvmscript").read_text().rstrip("\n")


def tvm_metadata(name: str):
    """The stored values: key "i" -> metadata["ir.GenericConst"][i], key "ffi.Tensor.i" ->
    metadata["ffi.Tensor"][i] (tensors in R.func_attr({"params": [...]}))."""
    path = DATA / f"{name}.npz"
    if not path.exists():
        return None
    with np.load(path) as data:
        consts = sorted((k for k in data.files if k.isdigit()), key=int)
        tensors = sorted((k for k in data.files if not k.isdigit()),
                         key=lambda k: int(k.rsplit(".", 1)[1]))
        table = {"ir.GenericConst": [data[k] for k in consts],
                 "ffi.Tensor": [data[k] for k in tensors]}
    return {k: v for k, v in table.items() if v}


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


@pytest.mark.parametrize("name", META_NAMES)
def test_tvm_show_meta_dump_reads_weights_and_reprints_identically(name):
    text = (DATA / f"{name}.tvmmeta").read_text().rstrip("\n")
    mod = relax.from_script(text)
    assert mod.script(show_meta=True) == text
    assert mod.script() == tvm_text(name)
    stored = tvm_metadata(name)["ffi.Tensor"]
    params = mod["main"].attrs["params"]
    assert len(params) == len(stored)
    for got, want in zip(params, stored):
        np.testing.assert_array_equal(got.data, want)


def test_from_relax_binds_the_weights_of_a_show_meta_dump():
    from msc.frontends.translate import from_relax

    graph, weights = from_relax((DATA / "params_mlp.tvmmeta").read_text())
    stored = tvm_metadata("params_mlp")["ffi.Tensor"]
    assert graph.inspect()["nodes"]["msc.linear_bias"] == 2
    assert len(weights) == len(stored)
    for got, want in zip(weights.values(), stored):
        np.testing.assert_array_equal(got, want)


def test_every_constant_and_attribute_tensor_gets_its_own_index():
    mod = relax.from_script(tvm_text("params_cnn"), metadata=tvm_metadata("params_cnn"))
    text = mod.script()
    assert text.count('metadata["ffi.Tensor"]') == 6 and 'metadata["ffi.Tensor"][5]' in text
    assert 'metadata["ir.GenericConst"][1]' in text
    assert text.endswith("# Metadata omitted. Use show_meta=True in script() method to show it.")
    shown = mod.script(show_meta=True)
    assert shown.startswith('metadata = tvm.ir.load_json("""{') and "Metadata omitted" not in shown
    again = relax.from_script(shown)
    for got, want in zip(again["main"].attrs["params"], tvm_metadata("params_cnn")["ffi.Tensor"]):
        np.testing.assert_array_equal(got.data, want)


def test_frontends_are_covered():
    kinds = {name.split("_")[0] for name in NAMES}
    assert {"fx", "ep", "onnx", "legalized", "params"} <= kinds
    assert META_NAMES
    assert any("TypeVar" in tvm_text(n) for n in NAMES)


# --------------------------------------------------------------------------------------------
# With TVM: its parser accepts msc's text; it still prints what is stored.

ACCEPT = r'''
import sys, json, hashlib
import numpy as np
import tvm
from tvm import ir, relax
from tvm.script.parser.core.entry import _default_globals


def digests(mod):
    # sha256 of every tensor constant's and attribute tensor's bytes
    out = []
    def visit(e):
        if isinstance(e, ir.GenericConst) and hasattr(e.value, "numpy") and \
                len(e.value.shape) > 0:  # not R.dtype/R.str nor inline scalars
            out.append(hashlib.sha256(e.value.numpy().tobytes()).hexdigest())
        for name in ("args", "fields", "blocks", "bindings"):
            for x in getattr(e, name, ()) or ():
                visit(x)
        for name in ("value", "body", "tuple_value"):
            if hasattr(e, name) and not isinstance(getattr(e, name), (str, int)):
                visit(getattr(e, name))
    for gv, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        if isinstance(func, relax.Function):
            visit(func)
            for t in (func.attrs or {}).get("params", []):
                out.append(hashlib.sha256(t.numpy().tobytes()).hexdigest())
    return out


results = {}
for item in json.loads(sys.stdin.read()):
    extra = _default_globals()
    if item["npz"]:
        with np.load(item["npz"]) as d:
            consts = [relax.const(d[k]) for k in sorted(d.files, key=int)]
        extra["metadata"] = {"ir.GenericConst": consts}
    try:
        mod = tvm.script.from_source(item["text"], extra_vars=extra)
        results[item["name"]] = {"ok": len(mod.functions) > 0, "script": mod.script(),
                                 "digests": digests(mod)}
        if item.get("inputs"):  # build what TVM parsed and run it (weights from the text)
            vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
            args = [tvm.runtime.tensor(np.asarray(a, "float32")) for a in item["inputs"]]
            args += list(mod["main"].attrs.get("params", []))
            out = vm["main"](*args)
            outs = list(out) if isinstance(out, (list, tuple)) or hasattr(out, "__len__") and \
                not hasattr(out, "numpy") else [out]
            results[item["name"]]["outputs"] = [o.numpy().tolist() for o in outs]
    except Exception as err:  # report, the test names the file
        results[item["name"]] = {"ok": False, "error": str(err)[-800:]}
print(json.dumps(results))
'''


def _run_tvm(code: str, stdin: str = "", *args) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], input=stdin, text=True, check=False,
                          capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


# Built by TVM from msc's show_meta text and by msc, outputs compared at 1e-4.
RUN = ("params_cnn", "fx_mlp")


def _digests(arrays) -> list:
    return [hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for a in arrays]


def test_tvm_parses_what_msc_prints():
    """TVM 0.27 parses msc's text: plain (metadata given) and show_meta=True (the metadata
    section alone carries the weights); it prints back the stored text, with the same
    constants and attribute tensors."""
    pytest.importorskip("tvm")

    items, expect = [], {}
    for name in NAMES:
        mod = relax.from_script(tvm_text(name), metadata=tvm_metadata(name))
        npz = DATA / f"{name}.npz"
        if "ffi.Tensor" not in (tvm_metadata(name) or {}):
            items.append({"name": name, "text": mod.script(),
                          "npz": str(npz) if npz.exists() else ""})
        items.append({"name": name + ":meta", "text": mod.script(show_meta=True), "npz": ""})
        meta = tvm_metadata(name) or {}
        expect[name + ":meta"] = _digests(meta.get("ir.GenericConst", []) +
                                          meta.get("ffi.Tensor", []))
    runs = {}
    for name in RUN:  # TVM builds msc's show_meta text; msc builds the same module
        mod = relax.from_script(tvm_text(name), metadata=tvm_metadata(name))
        x = np.random.default_rng(0).standard_normal(
            [int(d) for d in mod["main"].params[0].struct_info.values]).astype("float32")
        item = next(i for i in items if i["name"] == name + ":meta")
        item["inputs"] = [x.tolist()]
        runs[name] = run_vm(mod, [x] + [t.data for t in mod["main"].attrs.get("params", [])])
    for path in sorted(SCRIPTS.glob("*.tvmscript")):
        mod = relax.from_script(path.read_text())
        if "metadata" not in mod.script():
            items.append({"name": path.name, "text": mod.script(), "npz": ""})
    results = json.loads(_run_tvm(ACCEPT, json.dumps(items)))
    failed = {k: v.get("error", "empty") for k, v in results.items() if not v["ok"]}
    assert not failed, failed
    for name in NAMES:
        assert as_msc_prints(results[name + ":meta"]["script"]) == as_msc_prints(tvm_text(name))
        assert set(results[name + ":meta"]["digests"]) == set(expect[name + ":meta"]), name
    for name, want in runs.items():
        got = results[name + ":meta"]["outputs"]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("name", ["fx_cnn", "onnx_conv_dynamic", "legalized_mlp"])
def test_tvm_still_prints_the_stored_text(name, tmp_path):
    pytest.importorskip("tvm")
    pytest.importorskip("torch")
    code = (f"import sys, json; sys.path.insert(0, {str(DATA)!r}); import gen_tvm027 as g; "
            f"print(json.dumps(g.build({name!r}).script()))")
    assert json.loads(_run_tvm(code)) == tvm_text(name)


def test_from_relax_of_a_tvm_module_with_params_in_attrs():
    """A tvm.IRModule whose weights sit in attrs["params"] (keep_params_as_input=True)."""
    pytest.importorskip("tvm")
    pytest.importorskip("torch")
    code = (f"import sys, json; sys.path.insert(0, {str(DATA)!r}); import gen_tvm027 as g; "
            "from msc.frontends.translate import from_relax; "
            "graph, w = from_relax(g.build('params_mlp')); "
            "print(json.dumps([graph.inspect()['nodes'], [v.tolist() for v in w.values()]]))")
    nodes, weights = json.loads(_run_tvm(code))
    assert nodes["msc.linear_bias"] == 2
    stored = tvm_metadata("params_mlp")["ffi.Tensor"]
    assert len(weights) == len(stored)
    for got, want in zip(weights, stored):
        np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=0)
