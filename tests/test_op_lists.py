"""Op knowledge comes from the op table: no literal lists of op names outside it.

A literal list, set or tuple of three or more strings that are all registered op names (with or
without ``relax.``), or such a word list split from one string, is a second copy of something
the table knows: a trait (``ops_with("movement")``), a family (``ops_in("unary")``) or a fact a
consumer attaches (``ops_having("int8")``). Rows keyed by op name stay: a collection that is a
key or value of a dict literal, or the keys of ``**dict.fromkeys(...)`` spread into one, is a
row table (converter tables, layout rules), not a list. msc/relax/op/ is the table itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from msc.relax.op.registry import OPS

ROOT = Path(__file__).resolve().parents[1]
WALKED = ("msc", "frontends", "codegen", "compression")
THE_TABLE = Path("msc/relax/op")
MIN_NAMES = 3

# Words that are op names in another vocabulary: (file, the words) -> why they are not ops.
NOT_OP_NAMES = {
    ("msc/tir/intrin.py", ("isnan", "isinf", "isfinite")):
        "TIR's predicate intrinsics (T.isnan...), named like the Relax ops they lower",
    ("msc/viewer/model_explorer.py", ("min", "max", "mean", "std")):
        "the keys of a weight's statistics in the viewer's scene",
    ("msc/topi.py", ("max", "min", "sum")):
        "the __all__ of msc.topi: the names of its own functions (TVM's topi.sum ...)",
}


def _words(node: ast.AST) -> tuple | None:
    """The strings of a literal collection or of ``"a b c".split()``; None for anything else."""
    if isinstance(node, (ast.List, ast.Set, ast.Tuple)):
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return tuple(e.value for e in node.elts)
        return None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "split" and not node.args
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)):
        return tuple(node.func.value.value.split())
    return None


def _is_op_name(word: str) -> bool:
    return word.removeprefix("relax.") in OPS


def _parents(tree: ast.AST) -> dict:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_fromkeys(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "fromkeys" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "dict")


def _in_row_table(node: ast.AST, parents: dict) -> bool:
    """A key or value of a dict literal, or the keys of ``**dict.fromkeys(...)`` in one."""
    parent = parents.get(node)
    if isinstance(parent, ast.Dict):
        return True
    return (_is_fromkeys(parent) and parent.args and parent.args[0] is node
            and isinstance(parents.get(parent), ast.Dict))


def op_lists(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: (names)`` for each literal list of op names in the file at ``path``."""
    relative = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(), filename=relative)
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        words = _words(node)
        if (words is None or len(words) < MIN_NAMES or not all(map(_is_op_name, words))
                or _in_row_table(node, parents) or (relative, words) in NOT_OP_NAMES):
            continue
        found.append((node.lineno, f"{relative}:{node.lineno}: ({', '.join(map(repr, words))})"))
    return [text for _, text in sorted(found)]


def project_op_lists(root: Path = ROOT) -> list[str]:
    found = []
    for top in WALKED:
        for path in sorted((root / top).rglob("*.py")):
            if THE_TABLE not in path.relative_to(root).parents:
                found += op_lists(path, root)
    return found


def test_no_literal_lists_of_op_names_outside_the_op_table():
    found = project_op_lists()
    assert not found, (
        "literal lists of op names; ask the op table instead (ops_with('movement'), "
        "ops_in('unary'), ops_having('int8'); docs/relax.md 'What the table knows'), or make "
        "them rows of a dict when each op has its own value:\n" + "\n".join(found))


def test_the_exemptions_still_exist():
    """Each NOT_OP_NAMES entry names words still in its file (else drop the entry)."""
    for (relative, words) in NOT_OP_NAMES:
        tree = ast.parse((ROOT / relative).read_text())
        assert any(_words(n) == words for n in ast.walk(tree)), (relative, words)


def test_lists_are_found_and_rows_are_left(tmp_path):
    source = tmp_path / "msc" / "m.py"
    source.parent.mkdir()
    source.write_text(
        'VIEWS = ("reshape", "permute_dims", "squeeze")\n'
        'UNARY = {n: n for n in ["exp", "log", "relax.tanh"]}\n'
        'WORDS = "sum mean max".split()\n'
        'TWO = ("exp", "log")\n'
        'OTHER = ("exp", "log", "not_an_op")\n'
        'ROWS = {"ReduceL2": ("sum", "square", "sqrt"),\n'
        '        **dict.fromkeys(("nn.conv1d", "nn.conv2d", "nn.conv3d"), 1)}\n'
        'KEYS = dict.fromkeys(("nn.conv1d", "nn.conv2d", "nn.conv3d"))\n')
    found = op_lists(source, tmp_path)
    assert [f.split(": ")[0] for f in found] == ["msc/m.py:1", "msc/m.py:2", "msc/m.py:3",
                                                "msc/m.py:8"]
    assert "('reshape', 'permute_dims', 'squeeze')" in found[0]
    table = tmp_path / "msc" / "relax" / "op"
    table.mkdir(parents=True)
    (table / "defs.py").write_text(source.read_text())
    assert len(project_op_lists(tmp_path)) == 4  # the table's own lists are not counted
