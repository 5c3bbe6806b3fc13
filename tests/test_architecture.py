"""The project's shape stays as designed: no import circles among its packages, no source file
above 600 lines unless its docstring says why (``Over 600 lines: <reason>``), no module that
imports another module's private (``_name``) names, no ``except ImportError`` around imports of
its own modules.

The import graph is read from the source with ``ast``, so it sees every ``import`` and
``from ... import`` (also those inside functions), with relative imports resolved.
``from pkg import name`` is an edge to the module ``pkg.name`` when there is one, else to
``pkg``. Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``; that implicit
step is not an edge, so a package's ``__init__`` may import its submodules. A computed import
of a constant name (``importlib.import_module(".tour", __package__)``) is an edge too; one whose
name is built at run time is not seen.

Layers: the tour (``msc.tour``, ``msc demo``) is a showcase above everything else; only the
``demo`` command reaches it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("msc", "frontends", "codegen", "compression")
# The folders at the top of the repo that install under msc (setup.py's package_dir).
INSTALLED_AS = {"frontends": "msc.frontends", "codegen": "msc.codegen",
                "compression": "msc.compression"}
MAX_LINES = 600
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


@dataclass
class Project:
    """The Python modules under ``packages`` of ``root``: dotted name -> file."""

    root: Path
    packages: tuple = PACKAGES
    files: dict = field(default_factory=dict)

    def __post_init__(self):
        for package in self.packages:
            for path in sorted((self.root / package).rglob("*.py")):
                if "__pycache__" not in path.parts:
                    self.files[module_name(path.relative_to(self.root))] = path

    def owns(self, name: str) -> bool:
        return name.split(".")[0] in {INSTALLED_AS.get(p, p).split(".")[0]
                                      for p in self.packages}

    def nearest_module(self, name: str) -> str | None:
        """``name`` or its longest dotted prefix that is one of the project's modules."""
        parts = name.split(".")
        while parts and ".".join(parts) not in self.files:
            parts.pop()
        return ".".join(parts) or None


def module_name(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    parts[:1] = INSTALLED_AS.get(parts[0], parts[0]).split(".")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _base_of(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from`` import reads from (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _computed_import(node: ast.Call, module: str, is_package: bool) -> list[str]:
    """``import_module("a.b")`` / ``import_module(".b", __package__)`` with a constant name: the
    module it loads. A name built at run time (an f-string, a variable) stays unseen."""
    func = node.func
    if getattr(func, "attr", getattr(func, "id", None)) != "import_module" or not node.args:
        return []
    name = node.args[0]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return []
    level = len(name.value) - len(name.value.lstrip("."))
    if not level:
        return [name.value]
    package = module.split(".") if is_package else module.split(".")[:-1]
    rest = name.value[level:]
    return [".".join(package[:len(package) - (level - 1)] + ([rest] if rest else []))]


def imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """Absolute dotted names one import statement (or a computed import of a constant name)
    reaches: a module, or a package's member."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _base_of(node, module, is_package)
        return [base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call):
        return _computed_import(node, module, is_package)
    return []


def import_graph(project: Project) -> nx.DiGraph:
    """Module -> module edges, each with the first line (``line``) that makes it."""
    graph = nx.DiGraph()
    for module, path in project.files.items():
        graph.add_node(module)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in imported_names(node, module, is_package):
                target = project.nearest_module(name)
                if target and target != module and not graph.has_edge(module, target):
                    graph.add_edge(module, target, line=node.lineno)
    return graph


def _rotated(cycle: list) -> tuple:
    start = cycle.index(min(cycle))
    return tuple(cycle[start:] + cycle[:start])


def cycles_of(graph: nx.DiGraph, component: set) -> list[tuple]:
    """One shortest cycle through each edge of a strongly connected component."""
    sub = graph.subgraph(component)
    found = {_rotated([u] + nx.shortest_path(sub, v, u)[:-1]) for u, v in sub.edges}
    return sorted(found, key=lambda c: (len(c), c))


def chain(graph: nx.DiGraph, cycle: tuple) -> str:
    """``a:12 -> b:40 -> a``: a's line 12 imports b, b's line 40 imports a."""
    steps = [f"{u}:{graph.edges[u, v]['line']}" for u, v in zip(cycle, cycle[1:] + cycle[:1])]
    return " -> ".join(steps + [cycle[0]])


def circles(project: Project) -> list[str]:
    """Every import circle, as readable chains grouped by strongly connected component."""
    graph = import_graph(project)
    components = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    report = []
    for component in sorted(components, key=lambda c: (-len(c), min(c))):
        report.append(f"{len(component)} modules in a circle: {', '.join(sorted(component))}")
        report += [f"    {chain(graph, cycle)}" for cycle in cycles_of(graph, component)]
    return report


SIZE_REASON = "Over 600 lines:"


def _says_why_it_is_long(path: Path) -> bool:
    """The module docstring has ``Over 600 lines: <reason>`` with a reason of a few words: a
    file may stay whole where splitting it would cut one idea in two."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    _, found, reason = doc.partition(SIZE_REASON)
    return bool(found) and len(reason.split()) >= 5


def big_files(project: Project, limit: int = MAX_LINES) -> list[str]:
    sizes = {path: len(path.read_text().splitlines()) for path in project.files.values()}
    return [f"{path.relative_to(project.root)}: {n} lines"
            for path, n in sorted(sizes.items(), key=lambda kv: -kv[1])
            if n > limit and not _says_why_it_is_long(path)]


def private_imports(project: Project) -> list[str]:
    """``from <own module> import _name`` across modules, as ``path:line: _name from module``.
    A private name is the module's own business; a second module that needs it needs a public
    name (or the two are one idea, in one file). Pairs split by a suffix (``x`` and
    ``x_tasks``) that reach into each other show up here."""
    found = []
    for module, path in project.files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _base_of(node, module, is_package)
            if not project.owns(base):
                continue
            for alias in node.names:
                name = alias.name
                private = name.startswith("_") and not name.startswith("__")
                if private and f"{base}.{name}" not in project.files:
                    where = path.relative_to(project.root)
                    found.append(f"{where}:{node.lineno}: {name} from {base}")
    return found


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(getattr(k, "id", getattr(k, "attr", None)) in IMPORT_ERRORS for k in kinds)


def import_fallbacks(project: Project) -> list[str]:
    """``try: import <own module> except ImportError:`` sites, as ``path:line: names``."""
    found = []
    for module, path in project.files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Try) or not any(map(_catches_import_error,
                                                            node.handlers)):
                continue
            own = sorted({project.nearest_module(name) or name for stmt in node.body
                          for sub in ast.walk(stmt)
                          for name in imported_names(sub, module, is_package)
                          if project.owns(name)})
            if own:
                where = path.relative_to(project.root)
                found.append(f"{where}:{node.lineno}: except ImportError around {', '.join(own)}")
    return found


# --------------------------------------------------------------------------------------------
# The project.

PROJECT = Project(ROOT)


def test_no_import_circles():
    report = circles(PROJECT)
    assert not report, "import circles (module:line of the import -> imported module):\n" + \
        "\n".join(report)


def test_no_source_file_above_600_lines():
    # The size rule holds for the tests and benchmarks as well as the packages.
    offenders = big_files(Project(ROOT, PACKAGES + ("tests", "benchmarks")))
    assert not offenders, f"source files above {MAX_LINES} lines (split along a seam, or say " \
        f"why in the docstring: '{SIZE_REASON} ...'):\n" + "\n".join(offenders)


def test_no_module_imports_another_modules_private_names():
    offenders = private_imports(PROJECT)
    assert not offenders, "private names imported across modules (make the name public, or " \
        "keep the idea in one module):\n" + "\n".join(offenders)


def test_no_import_error_fallbacks_around_own_modules():
    offenders = import_fallbacks(PROJECT)
    assert not offenders, "a broken import of our own code must fail, not fall back:\n" + \
        "\n".join(offenders)


def test_only_the_demo_command_reaches_the_tour():
    graph = import_graph(PROJECT)
    inward = sorted(f"{u}:{graph.edges[u, v]['line']} -> {v}" for u, v in graph.edges
                    if _in(v, "msc.tour") and not _in(u, "msc.tour")
                    and u != "msc.cli.commands")
    assert not inward, "the tour is a showcase; the product must not import it:\n" + \
        "\n".join(inward)


def test_the_tour_runs_the_command_line_without_importing_it():
    graph = import_graph(PROJECT)
    down = sorted(f"{u}:{graph.edges[u, v]['line']} -> {v}" for u, v in graph.edges
                  if _in(u, "msc.tour") and _in(v, "msc.cli"))
    assert not down, "msc.tour imports msc.cli (a circle with `msc demo`):\n" + "\n".join(down)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_packages_are_found():
    assert {"msc", "msc.relax", "msc.frontends", "msc.codegen", "msc.compression"} <= \
        set(PROJECT.files)


# --------------------------------------------------------------------------------------------
# The checker itself, on a synthetic project.

def _write(root: Path, files: dict) -> Project:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Project(root, packages=("pkg",))


def test_a_circle_through_a_function_level_import_is_found(tmp_path):
    project = _write(tmp_path, {
        "pkg/__init__.py": "from .a import run\n",  # __init__ -> submodule: no circle
        "pkg/a.py": "import os\nfrom pkg.b import helper\n\ndef run():\n    return helper()\n",
        "pkg/b.py": "def helper():\n    from . import a\n    return a\n",
        "pkg/c.py": "from pkg import a\n",  # a submodule's parent is not an edge back
    })
    assert circles(project) == ["2 modules in a circle: pkg.a, pkg.b",
                                "    pkg.a:2 -> pkg.b:2 -> pkg.a"]


def test_relative_imports_and_package_members_resolve(tmp_path):
    project = _write(tmp_path, {
        "pkg/__init__.py": "", "pkg/sub/__init__.py": "VALUE = 1\n",
        "pkg/sub/x.py": "from .. import y\nfrom . import VALUE\nfrom ..sub.z import f\n",
        "pkg/y.py": "", "pkg/sub/z.py": "def f():\n    pass\n",
    })
    assert set(import_graph(project).edges) == {("pkg.sub.x", "pkg.y"), ("pkg.sub.x", "pkg.sub"),
                                                ("pkg.sub.x", "pkg.sub.z")}
    assert circles(project) == []


def test_a_computed_import_of_a_constant_name_is_an_edge(tmp_path):
    project = _write(tmp_path, {
        "pkg/__init__.py": "", "pkg/sub/__init__.py": "",
        "pkg/sub/cmd.py": "import importlib\n\ndef run():\n"
                          "    return importlib.import_module('.tour', __package__)\n",
        "pkg/sub/tour.py": "from .cmd import run\n",
        "pkg/late.py": "from importlib import import_module\n"
                       "def f(n):\n    return import_module(f'pkg.{n}'), import_module('pkg.y')\n",
        "pkg/y.py": "",
    })
    assert set(import_graph(project).edges) == {("pkg.sub.cmd", "pkg.sub.tour"),
                                                ("pkg.sub.tour", "pkg.sub.cmd"),
                                                ("pkg.late", "pkg.y")}
    assert circles(project)[0] == "2 modules in a circle: pkg.sub.cmd, pkg.sub.tour"


def test_big_files_and_own_import_fallbacks_are_found(tmp_path):
    project = _write(tmp_path, {
        "pkg/__init__.py": "", "pkg/big.py": "x = 1\n" * 601, "pkg/small.py": "x = 1\n" * 600,
        "pkg/opt.py": "try:\n    import numpy\nexcept ImportError:\n    numpy = None\n"
                      "try:\n    from .small import x\nexcept (ImportError, OSError):\n    x = 0\n",
    })
    assert big_files(project) == ["pkg/big.py: 601 lines"]
    (tmp_path / "pkg/big.py").write_text('"""Over 600 lines: one table that reads as a whole."""\n'
                                         + "x = 1\n" * 600)
    (tmp_path / "pkg/vague.py").write_text('"""Over 600 lines: big."""\n' + "x = 1\n" * 600)
    assert big_files(Project(tmp_path, packages=("pkg",))) == ["pkg/vague.py: 601 lines"]
    assert import_fallbacks(project) == ["pkg/opt.py:5: except ImportError around pkg.small"]


def test_private_names_imported_across_modules_are_found(tmp_path):
    project = _write(tmp_path, {
        "pkg/__init__.py": "", "pkg/conv.py": "_PLAN = 1\nPLAN = 2\n",
        "pkg/conv_tasks.py": "from .conv import PLAN, _PLAN\n",  # the suffix pair reaches in
        "pkg/_impl.py": "", "pkg/uses.py": "from . import _impl\nfrom os import _exit\n",
        "pkg/dunder.py": "from .conv import __doc__\n",
    })
    assert private_imports(project) == ["pkg/conv_tasks.py:1: _PLAN from pkg.conv"]
