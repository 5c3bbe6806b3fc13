"""Demo step: hostile input on the command line (``step_hostile``, run by ``msc demo``):
bad arguments and files end in exit 2 with one line naming them, and an
out-of-range index names its value."""

from __future__ import annotations

import os

import numpy as np

from .shared import banner, run_msc


def _run(argv: list[str]) -> tuple[int, str]:
    proc = run_msc(argv)
    lines = [line for line in proc.stderr.splitlines() if ": error:" in line]
    return proc.returncode, (lines or [""])[0]


def _files(out: str) -> dict:
    os.makedirs(out, exist_ok=True)
    empty, pickled = os.path.join(out, "empty.npy"), os.path.join(out, "pickled.npy")
    open(empty, "wb").close()
    with open(pickled, "wb") as f:  # an object array: loading it would unpickle
        np.save(f, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    return {"empty": empty, "pickled": pickled,
            "model": os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                                  "conv_relu.json")}


def step_hostile(out: str) -> None:
    """Five hostile command lines (each exits 2, one line naming the input), then a take whose
    index is past the end (the error names the value and the valid range)."""
    f = _files(out)
    banner("msc on hostile input: exit 2 and one line naming it, never a traceback")
    cases = [["run", f["model"], "--input", "x:1,²,4"], ["run", f["model"], "--input",
                                                         "data:" + f["empty"]],
             ["run", f["model"], "--input", "data:" + f["pickled"]],
             ["bench", f["model"], "--min-time", "inf"], ["inspect", f["model"] + ".missing"]]
    for argv in cases:
        status, line = _run(argv)
        if status != 2 or not line:
            raise SystemExit(f"{argv}: exit {status}, message {line!r}")
        print(f"exit {status}: {line[:110]}")
    _index_error()


def _index_error() -> None:
    from ..backend.legalize import legalize_call
    from ..backend.legalize.testing import build_call
    from ..backend.lowering.compile import compile_prim_func
    from ..errors import RuntimeCallError

    table, ids = np.arange(12, dtype="float32").reshape(3, 4), np.array([0, 2, 7])
    kernel = compile_prim_func(legalize_call(build_call("take", [table, ids], axis=0)))
    try:
        kernel(table, ids)
    except RuntimeCallError as err:
        if "index 7" not in str(err):
            raise SystemExit(f"the error does not name the index: {err}") from None
        print(f"take(table[3, 4], [0, 2, 7]): {str(err).split(' (hint')[0]}")
        return
    raise SystemExit("an out-of-range take returned a value")
