"""Random command lines (issue #20): whatever the arguments (unknown flags, bad shape specs,
hostile .npy / model files, odd paths, torch specs naming no factory), ``msc.cli.main.main``
returns 0, 1 or 2, never 3 and never raises; a 2 comes with one ``msc CMD: error:`` line on
stderr naming the input; nothing is written outside the test's folder.

Heavy commands stay cheap: the models are tiny (tests/cli/fuzz_corpus.py) and bench always
gets --repeat / --min-time values that cost nothing. Long run:
``MSC_FUZZ_EXAMPLES=5000 python -m pytest tests/cli/test_cli_fuzz.py -q``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msc.cli import commands
from msc.cli.main import main
from tests.cli.fuzz_corpus import EXTENSIONS, ODD_NAMES, make_corpus
from tests.helpers.fuzz import EXAMPLES, FUZZ_SETTINGS, time_guard

ROOT = Path(__file__).resolve().parents[2]
CLI_SETTINGS = settings(FUZZ_SETTINGS, max_examples=EXAMPLES)  # ~30 ms an example

MODELS = ["onnx", "gather", "json", "empty.json", "garbage.json", "empty.onnx", "garbage.onnx",
          "empty.py", "garbage.py", "empty.tvmscript", "garbage.tvmscript", "truncated.onnx",
          "truncated.json", "not_utf8.py", "folder.onnx", "missing.onnx", "good.npy",
          "odd0.onnx", "odd3.onnx", "odd4.onnx", "odd6.onnx"]
TORCH = ["torch_ok.py:make", "torch_ok.py:missing", "torch_ok.py:not_a_module",
         "torch_raises.py:make", "torch_exit.py:make", "nope.py:make", "torch_ok.py:"]
ARRAYS = ["good.npy", "int.npy", "pickled.npy", "npz_as.npy", "empty.npy", "garbage.npy",
          "header_lies.npy", "calib.npz", "pickled.npz", "garbage.npz", "missing.onnx"]

_DIMS = st.sampled_from(["1", "2", "4", "N", "0", "x", "-1", "", "²", "１", "3.5",
                         "99999999999999", "1e3", " 2"])
_DTYPES = st.sampled_from(["", ":float32", ":int64", ":float99", ":bool", ":object", ":", ":f"])
_NAMES = st.sampled_from(["x", "ids", "nope", "", "1x", "a/b", "x.y", "ü"])
_FLOATS = st.sampled_from(["0", "1e-3", "-1", "nan", "inf", "-inf", "x", "", "1e400"])
_INTS = st.sampled_from(["1", "2", "0", "-1", "x", "99999999999", "1e3", "²"])
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=12)


@st.composite
def shape_spec(draw) -> str:
    dims = ",".join(draw(st.lists(_DIMS, min_size=1, max_size=4)))
    return f"{draw(_NAMES)}:{dims}{draw(_DTYPES)}"


def _files(files: dict, names: list):
    """Corpus files by role; ``role:factory`` names a torch spec on that file."""
    def path(name: str) -> str:
        role, sep, factory = name.partition(":")
        return files[role] + sep + factory if role in files else name
    return st.sampled_from([path(n) for n in names])


def _outputs(files: dict):
    """Output paths, all inside the corpus folder: fresh, existing, inputs, odd, folders."""
    fresh = st.builds(lambda odd, ext: f"out/{odd}{ext}", st.sampled_from(ODD_NAMES + ["o"]),
                      st.sampled_from(EXTENSIONS))
    return st.one_of(fresh, _files(files, ["onnx", "json", "folder.onnx", "good.npy"]),
                     st.sampled_from(["", "out/", "../up.json", "out/deep/er/x.json", "o.txt"]))


def _flag_values(files: dict) -> dict:
    """The value strategy of every flag any command takes (None: a switch)."""
    inputs = st.one_of(shape_spec(), st.builds(lambda n, f: f"{n}:{f}", _NAMES,
                                                _files(files, ARRAYS)))
    dims = st.sampled_from(["N=2", "N=0", "N=-1", "N=x", "=3", "N", "N=²", "N=99999999999999",
                            "M=3", "N=1,2"])
    return {"--input": inputs, "--input-info": shape_spec(), "--input-info-a": shape_spec(),
            "--input-info-b": shape_spec(), "--dim": dims, "--seed": _INTS,
            "--atol": _FLOATS, "--rtol": _FLOATS, "--threads": _INTS, "-o": _outputs(files),
            "--output": _outputs(files), "--save": _outputs(files), "--to": st.sampled_from(
                ["relax", "torch", "onnx", ""]), "--overlay": _files(files, ARRAYS + [
                    "bad_overlay.json", "list.json"]),
            "--calib": _files(files, ARRAYS), "--density": _FLOATS, "--stride": _INTS,
            "--config": _files(files, ["list.json", "garbage.json", "bad_overlay.json",
                                       "missing.onnx", "empty.json"]),
            "--plan": _files(files, ["list.json", "garbage.json", "bad_overlay.json"]),
            "--method": st.sampled_from(["minmax", "entropy", "bogus"]),
            "--target-sqnr": _FLOATS, "--exclude-regex": st.sampled_from(["(", "conv.*", "["]),
            "--check": None, "--json": None, "--force": None, "--graph": None, "--brief": None,
            "--no-open": None, "--model-explorer": None, "--no-per-layer": None,
            "--dir": st.sampled_from(["kernels", "", ".", "../kernels", "tiny.onnx"]),
            "--max-mb": _FLOATS, "--bogus": None, "--input=": None, "-": None, "--": None}


REQUIRED = {"codegen": ("--to", "-o"), "export": ("-o",), "prune": ("-o",),
            "quantize": ("--calib", "-o")}


def _own_flags() -> dict[str, list[str]]:
    """Each command's own options, read from its parser (so new options get fuzzed too)."""
    from msc.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.choices and "run" in a.choices)
    return {name: sorted(o for a in p._actions for o in a.option_strings if o.startswith("--")
                         and o not in ("--help", "--quiet"))
            for name, p in sub.choices.items()}


FLAGS = _own_flags()


@st.composite
def command_line(draw, files: dict) -> list[str]:
    """``[command, model..., flags...]``: the command's own flags (now and then another's, a
    stray word or a missing value), values often wrong."""
    name = draw(st.sampled_from(sorted(set(commands.COMMANDS) - {"demo"})))
    good = _files(files, ["onnx", "gather", "json", "odd3.onnx"])
    models = st.one_of(good, good, _files(files, MODELS), _files(files, TORCH), _TEXT)
    argv = [name] + [draw(models) for _ in range(2 if name == "diff" else 1)]
    if name == "cache":  # an action, not a model
        argv[1] = draw(st.sampled_from(["size", "prune", "clear", "bogus"]))
    values = _flag_values(files)
    own = st.sampled_from(FLAGS[name])
    for _ in range(draw(st.integers(0, 5))):
        flag = draw(own if draw(st.integers(0, 7)) else st.sampled_from(sorted(values)))
        argv.append(flag)
        value = values.get(flag, _TEXT)
        if value is not None and draw(st.integers(0, 19)):
            argv.append(draw(value))
    for flag in REQUIRED.get(name, ()):
        if draw(st.integers(0, 9)):  # mostly given, so the run gets past argparse
            argv += [flag, draw(values[flag])]
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(_TEXT))
    return _cheap(draw, name, argv)


# A command line that works on the tiny models, per command: one_bad_flag breaks one thing in
# it, so the fuzz also reaches what runs after argparse and loading (build, run, write).
VALID = {"inspect": ["{onnx}"], "export": ["{onnx}", "-o", "out/e.json", "--force"],
         "codegen": ["{json}", "--to", "relax", "-o", "out/cg", "--force"],
         "run": ["{onnx}", "--dim", "N=2"], "bench": ["{gather}", "--dim", "N=1"],
         "diff": ["{onnx}", "{json}"], "view": ["{json}", "--no-open", "-o", "out/v.html"],
         "prune": ["{json}", "-o", "out/p.json", "--force", "--density", "0.5"],
         "quantize": ["{onnx}", "--calib", "{calib.npz}", "-o", "out/q.json", "--force"],
         "cache": ["size"]}


@st.composite
def one_bad_flag(draw, files: dict) -> list[str]:
    """A working command line of one command plus one flag of its own with a drawn value."""
    name = draw(st.sampled_from(sorted(VALID)))
    argv = [name] + [a.format(**{k.replace(".", "_"): v for k, v in files.items()})
                     if a.startswith("{") else a for a in
                     [x.replace("calib.npz", "calib_npz") for x in VALID[name]]]
    flag = draw(st.sampled_from(FLAGS[name]))
    value = _flag_values(files).get(flag, _TEXT)
    argv += [flag] + ([draw(value)] if value is not None else [])
    return _cheap(draw, name, argv)


def _cheap(draw, name: str, argv: list[str]) -> list[str]:
    """Keep the costly runs short: bench rounds of no time, prune without latency, and no
    generated test (a subprocess) for codegen."""
    if name == "bench":
        argv += ["--repeat", draw(st.sampled_from(["1", "0", "x"])),
                 "--min-time", draw(st.sampled_from(["0", "nan", "inf", "-1", "x"]))]
    if name in ("run", "bench", "codegen") and draw(st.booleans()):
        argv += ["--dim", draw(st.sampled_from(["N=2", "N=2", "N=0", "N=99999999999999"]))]
    if name == "prune":
        argv.append("--no-latency")
    if name == "quantize":
        argv.append("--no-per-layer")
    return [a for a in argv if a != "--test"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clifuzz")
    return folder, make_corpus(folder / "files")


@pytest.fixture
def no_browser(monkeypatch):
    """``msc view`` opens a browser (or Model Explorer's server, until Ctrl+C)."""
    from msc.viewer import model_explorer

    monkeypatch.setattr("webbrowser.open", lambda url: True)
    monkeypatch.setattr(model_explorer, "open_model_explorer", lambda paths: None)


def _tree(root: Path) -> set[str]:
    skip = {".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache"}
    found = set()
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        found.update(os.path.join(folder, n) for n in names)
    return found


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout / stderr as a terminal would have them: UTF-8, stdout strict
    (a pipe), stderr backslashreplace (Python's own)."""
    import contextlib

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_guard(60):
        status = main(argv)
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8", "backslashreplace"))
    return status, texts[0], texts[1]


def _named(line: str, argv: list[str]) -> bool:
    """The error line names something of the command line: a flag, an argument, a file."""
    for arg in argv:
        for form in {arg, os.path.basename(arg.rstrip("/")), arg.partition(":")[0],
                     arg.encode("utf-8", "backslashreplace").decode(), repr(arg)[1:-1]}:
            if len(form) >= 2 and form in line:
                return True
    return "argument" in line or "command" in line or "--" in line


def check_exit(argv: list[str]) -> int:
    status, _, err = run_cli(argv)
    assert status in (0, 1, 2), f"exit {status} for {argv!r}:\n{err[-3000:]}"
    if "--traceback" not in argv:
        assert "Traceback" not in err, f"{argv!r}:\n{err[-3000:]}"
    if status == 2:
        lines = [line for line in err.splitlines() if line.startswith("msc") and ": error:" in line]
        assert len(lines) == 1, f"{argv!r}: want one error line, got:\n{err[-2000:]}"
        assert _named(lines[0], argv), f"{argv!r}: the error names no input: {lines[0]}"
    return status


def test_cli_fuzz_every_command(corpus, no_browser, monkeypatch):
    from msc.backend.llvm.cache import default_cache_dir
    from msc.backend.llvm.jit import get_jit

    folder, files = corpus
    get_jit()  # the process's JIT keeps the real kernel cache; `msc cache` gets a folder here
    monkeypatch.setenv("MSC_CACHE_DIR", str(folder / "files" / "kernels"))
    # `msc cache clear` must never reach the user's (shared) cache from a test
    assert default_cache_dir() == folder / "files" / "kernels"
    work = folder / "files" / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)  # relative outputs (and msc view's default out/) land here
    before = _tree(ROOT)

    @CLI_SETTINGS
    @given(st.one_of(command_line(files), one_bad_flag(files)))
    def fuzz(argv):
        check_exit(argv)

    fuzz()
    assert _tree(ROOT) == before, "the fuzz wrote into the repository"
