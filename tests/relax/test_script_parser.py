"""TVMScript parser: print -> parse -> print fixed points, decorator form, older spellings,
metadata forms, and errors that point at the source (never executing it)."""

import base64
import json
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from msc import relax
from msc.errors import ParseError
from msc.relax.analysis import structural_equal
from msc.script import ir as I
from msc.script import relax as R
from msc.script import tir as T

GOLDEN = Path(__file__).parent / "data" / "script"
GOLDEN_FILES = sorted(p.name for p in GOLDEN.glob("*.tvmscript"))

# A 2x2 float32 tensor [[0, 1], [2, 3]] as TVM serializes it (a DLTensor blob, base64).
TVM_BLOB = ("P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAgAAAAIgAQACAAAAAAAAAAIAAAAAAAAAEAAAAAAAAAAAAAAA"
            "AACAPwAAAEAAAEBA")

SEED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32"), w: R.Tensor((784, 128), dtype="float32")) -> R.Tensor((1, 128), dtype="float32"):
        with R.dataflow():
            lv = R.matmul(x, w)
            gv = R.nn.relu(lv)
            R.output(gv)
        return gv
'''


@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_golden_is_a_fixed_point(name):
    text = (GOLDEN / name).read_text().rstrip("\n")
    mod = relax.from_script(text)
    assert mod.script(show_meta=True) == text
    assert structural_equal(relax.from_script(mod.script(show_meta=True)), mod)


def test_seed_example_infers_annotations():
    mod = relax.from_script(SEED)
    gv = mod["main"].body.blocks[0].bindings[1].var
    assert type(gv) is relax.Var and gv.struct_info == relax.TensorStructInfo((1, 128), "float32")
    lv = mod["main"].body.blocks[0].bindings[0].var
    assert type(lv) is relax.DataflowVar


@I.ir_module
class SeedModule:
    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32"),
             w: R.Tensor((784, 128), dtype="float32")) -> R.Tensor((1, 128), dtype="float32"):
        with R.dataflow():
            lv = R.matmul(x, w)
            gv = R.nn.relu(lv)
            R.output(gv)
        return gv


batch = TypeVar("batch")


@R.function
def lone(x: R.Tensor((batch, 4), dtype="float32")) -> R.Tensor((batch, 4), dtype="float32"):
    y = R.add(x, x)
    return y


def test_decorator_form_equals_from_script():
    assert isinstance(SeedModule, relax.IRModule)
    assert SeedModule.script() == relax.from_script(SEED).script()
    assert structural_equal(SeedModule, relax.from_script(SEED))


def test_lone_function_decorator_reads_python_type_vars():
    assert isinstance(lone, relax.Function)
    assert lone.params[0].struct_info.values[0].name == "batch"
    text = repr(lone)
    assert 'batch = TypeVar("batch")' in text and "def lone(x:" in text
    assert repr(relax.from_script(text)) == text


def test_decorated_class_inside_a_function():
    @I.ir_module
    class Local:
        @T.prim_func(private=True, s_tir=True)
        def add_one(A: T.Buffer((T.int64(2),), "float32"), B: T.Buffer((T.int64(2),), "float32")):
            for i in range(T.int64(2)):
                with T.sblock("b"):
                    vi = T.axis.spatial(T.int64(2), i)
                    B[vi] = A[vi] + T.float32(1)

        @R.function
        def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
            cls = Local
            y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((2,), dtype="float32"))
            return y

    text = Local.script()
    assert "R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((2,), dtype=\"float32\"))" in text
    assert relax.from_script(text).script() == text


def test_older_spellings():
    text = '''
@I.ir_module
class Module:
    @T.prim_func
    def tir_relu(x: T.Buffer[(1, 128), "float32"], y: T.Buffer[(1, 128), "float32"]):
        for i, j in T.grid(1, 128):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.max(x[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor((1, 128), "float32")) -> R.Tensor((1, 128), "float32"):
        cls = Module
        with R.dataflow():
            lv0 = R.call_tir(cls.tir_relu, (x,), (1, 128), dtype="float32")
            R.output(lv0)
        return lv0
'''
    mod = relax.from_script(text)
    out = mod.script()
    assert 'lv0 = R.call_tir(cls.tir_relu, (x,), out_ty=R.Tensor((1, 128), dtype="float32"))' \
        in out
    assert relax.from_script(out).script() == out


def test_string_dims_and_in_function_vars():
    text = '''
@R.function
def main(x: R.Tensor(("n", "m"), "float32")) -> R.Tensor(("n * m",), "float32"):
    n = T.int64()
    m = T.int64()
    y = R.reshape(x, R.shape([n * m]))
    return y
'''
    func = relax.from_script(text)
    assert str(func.ret_struct_info.values[0]) in ("n * m", "m * n")


def test_literal_takes_its_annotations_dtype():
    text = '''
@R.function
def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
    p: T.int32 = 3
    return x
'''
    binding = relax.from_script(text).body.blocks[0].bindings[0]
    assert binding.value.value.dtype == "int32"


# --------------------------------------------------------------------------------------------
# Metadata.

def test_tvm_legacy_metadata_section():
    graph = {"root": 1, "nodes": [
        {"type_key": ""}, {"type_key": "Map", "keys": ["relax.expr.Constant"], "data": [2]},
        {"type_key": "Array", "data": [3]},
        {"type_key": "relax.expr.Constant", "attrs": {"data": "0", "span": "0"}}],
        "b64ndarrays": [TVM_BLOB], "attrs": {"tvm_version": "0.17.dev0"}}
    text = f'''metadata = tvm.ir.load_json("""{json.dumps(graph)}""")
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), dtype="float32")) -> R.Tensor((2, 2), dtype="float32"):
        gv: R.Tensor((2, 2), dtype="float32") = R.add(x, metadata["relax.expr.Constant"][0])
        return gv
'''
    const = relax.from_script(text)["main"].body.blocks[0].bindings[0].value.args[1]
    np.testing.assert_array_equal(const.data, np.arange(4, dtype="float32").reshape(2, 2))


def test_metadata_can_be_supplied():
    text = SEED.replace("R.matmul(x, w)", 'R.matmul(R.add(x, metadata["ir.GenericConst"][0]), w)')
    mod = relax.from_script(text, metadata={"ir.GenericConst": [np.ones((1, 784), "float32")]})
    assert "metadata" in mod.script()
    with pytest.raises(ParseError, match="no metadata section"):
        relax.from_script(text)


def test_msc_metadata_keeps_dtype_and_values():
    values = np.array([[True, False]]), np.arange(6, dtype="int8").reshape(2, 3)
    entries = ", ".join(
        f'{{"dtype": "{v.dtype.name}", "shape": {list(v.shape)}, '
        f'"data": "{base64.b64encode(v.tobytes()).decode()}"}}' for v in values)
    text = SEED.replace("R.matmul(x, w)", 'R.add(x, metadata["relax.expr.Constant"][1])') + \
        f'\nmetadata = {{"relax.expr.Constant": [{entries}]}}\n'
    with pytest.raises(ParseError, match="int8"):  # annotation check through inference
        relax.from_script(text.replace("(1, 784)", "(2, 3)"))
    text = text.replace("(1, 784), dtype=\"float32\")", "(2, 3), dtype=\"int8\")")
    text = text.replace("gv = R.nn.relu(lv)", "gv = lv")
    mod = relax.from_script(text.replace("R.Tensor((1, 128), dtype=\"float32\"):",
                                         "R.Tensor((2, 3), dtype=\"int8\"):"))
    const = mod["main"].body.blocks[0].bindings[0].value.args[1]
    np.testing.assert_array_equal(const.data, values[1])


# --------------------------------------------------------------------------------------------
# Errors: line, column, caret; nothing executed.

def _error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        relax.from_script(text)
    return info.value


BODY = '''@R.function
def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
    {line}
    return y
'''


@pytest.mark.parametrize("line, message, col", [
    ("y = R.no_such_op(x)", "unknown op R.no_such_op", 9),
    ("y = R.nn.relu(x, x, x)", "bad arguments for R.nn.relu", 9),
    ('y: R.Tensor((3, 2), "float32") = R.nn.relu(x)', "does not match the inferred", 8),
    ("y = R.add(x, z)", "undefined variable 'z'", 18),
    ('y = __import__("os").system("echo pwned")', "unsupported callee", 9),
    ('y = __import__("os")', "undefined function '__import__'", 9),
    ('y = exec("import os")', "undefined function 'exec'", 9),
    ("y = x.__class__", "unsupported attribute", 9),
    ("y = lambda: x", "unsupported syntax: Lambda", 9),
    ("y = [v for v in x]", "unsupported syntax: ListComp", 9),
    ("import os", "unsupported statement: Import", 5),
    ("y = R.add(x, x) +", "syntax error", 22),
])
def test_errors_point_at_the_source(line, message, col):
    err = _error(BODY.format(line=line))
    assert message in str(err)
    assert err.context["line"] == 3 and err.col == col
    caret_line = str(err).splitlines()[-1]
    assert caret_line.index("^") - 2 == col - 1
    assert line.strip() in str(err)


def test_injection_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    text = BODY.format(line=f'y = open("{marker}", "w").write("x")')
    with pytest.raises(ParseError):
        relax.from_script(text)
    module_level = f'open("{marker}", "w")\n' + BODY.format(line="y = x")
    with pytest.raises(ParseError, match="unsupported module-level statement"):
        relax.from_script(module_level)
    assert not marker.exists()


def test_shape_error_names_op_and_line():
    err = _error(BODY.format(line='y = R.add(x, R.const(np_array, "float32"))'))
    assert "undefined variable 'np_array'" in str(err)
    err = _error('''@R.function
def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((4, 5), "float32")) -> R.Tensor((2, 5), "float32"):
    y = R.matmul(x, w)
    return y
''')
    assert err.context["line"] == 3 and "matmul" in str(err)


def test_return_annotation_is_checked():
    err = _error(BODY.replace('-> R.Tensor((2, 3), "float32")', '-> R.Tensor((3,), "int32")')
                 .format(line="y = x"))
    assert "return value does not match" in str(err) and err.context["line"] == 4


def test_output_must_be_bound_in_the_block():
    err = _error('''@R.function
def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
    with R.dataflow():
        y = R.nn.relu(x)
        R.output(z)
    return y
''')
    assert "'z' is not bound" in str(err) and err.context["line"] == 5


def test_tvm_ffi_json_graph_metadata():
    """tvm-ffi's object graph (``type``/``data`` nodes), tensors as base64 DLTensor blobs."""
    graph = {"root_index": 0, "nodes": [
        {"type": "ffi.Map", "data": [1, 2]}, {"type": "ffi.String", "data": "ir.GenericConst"},
        {"type": "ffi.Array", "data": [3]}, {"type": "ir.GenericConst", "data": {"data": 4}},
        {"type": "ffi.Tensor", "data": TVM_BLOB}]}
    from msc.relax.parser.metadata import decode_tvm_json

    table = decode_tvm_json(graph)
    np.testing.assert_array_equal(table["ir.GenericConst"][0].data,
                                  np.arange(4, dtype="float32").reshape(2, 2))
