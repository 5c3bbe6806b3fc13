"""Each finding of the CLI fuzz (tests/cli/test_cli_fuzz.py), pinned: these command lines used
to exit 3 (a traceback), hang or print a broken line; now each exits 2 with one error line
naming the input, or succeeds."""

from __future__ import annotations

import pytest

from tests.cli.fuzz_corpus import make_corpus
from tests.cli.test_cli_fuzz import check_exit, run_cli


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("args, words", [
    (["--input-info", "x:²,4"], "dim '²' is not a size"),          # int('²') raised
    (["--dim", "N=²"], "bad --dim 'N=²'"),
    (["--input", "x:empty.npy"], "empty.npy: not a readable .npy"),  # EOFError
    (["--input", "x:pickled.npy"], "pickled.npy: not a readable .npy"),
    (["--input", "x:header_lies.npy"], "header_lies.npy: not a readable"),  # TokenError
    (["--input", "x:npz_as.npy"], "npz_as.npy: an .npz archive"),   # AttributeError later
    (["--seed", "-1"], "--seed: '-1'"),                              # numpy ValueError
    (["--threads", "1000000"], "--threads: '1000000' threads: at most 256"),
    (["--dim", "N=99999999999999"], "tensor 'x': a random input of shape"),  # MemoryError
])
def test_run_refuses(files, args, words):
    args = [a.replace("x:", "x:" + files["onnx"].rpartition("/")[0] + "/")
            if a.endswith(".npy") else a for a in args]
    status, _, err = run_cli(["run", files["onnx"], *args])
    assert status == 2 and words in err, err
    check_exit(["run", files["onnx"], *args])


def test_bench_refuses_endless_min_time(files):
    status, _, err = run_cli(["bench", files["onnx"], "--dim", "N=1", "--min-time", "inf"])
    assert status == 2 and "--min-time: 'inf'" in err  # used to time forever


@pytest.mark.parametrize("flag", ["--config", "--plan"])
def test_prune_names_a_config_that_is_not_utf8(files, tmp_path, flag):
    argv = ["prune", files["onnx"], "-o", str(tmp_path / "p.json"), flag,
            files["garbage.json"], "--no-latency"]
    status, _, err = run_cli(argv)  # UnicodeDecodeError before
    assert status == 2 and "garbage.json: cannot read the" in err, err


def test_undecodable_file_name_prints(files):
    """A Linux file name that is not UTF-8 reaches Python as surrogates; printing it on stdout
    raised UnicodeEncodeError after the work was done (exit 3)."""
    status, out, _ = run_cli(["inspect", files["odd4.onnx"]])
    assert status == 0 and "\\xff\\xfe4.onnx (onnx)" in out  # the bytes, printed back


def test_newline_in_a_file_name_stays_on_the_error_line(files, tmp_path):
    odd = files["odd6.onnx"]  # "new\nline6.onnx"
    status, _, err = run_cli(["export", odd, "-o", odd, "--force"])  # the input: refused
    assert status == 2
    assert "new\\nline6.onnx: this output is an input" in err.splitlines()[0], err


class _Opens:
    """Unpickling this calls open(path, "w"): proof that a loader ran the pickle."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_input_is_never_unpickled(files, tmp_path):
    import numpy as np

    marker, evil = tmp_path / "unpickled", tmp_path / "evil.npy"
    np.save(evil, np.array([_Opens(str(marker))], dtype=object), allow_pickle=True)
    status, _, err = run_cli(["run", files["onnx"], "--input", f"x:{evil}"])
    assert status == 2 and "evil.npy: not a readable .npy array" in err, err
    assert not marker.exists()
