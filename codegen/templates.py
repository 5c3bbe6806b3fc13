"""The fixed parts of generated scripts: the standalone test (load baseline/, compare, report).

Both codegens end their script with ``test_section(...)``: a ``main()`` that loads the inputs
and golden outputs from ``baseline/baseline.npz`` (keyed by alias, never pickled), calls the
script's own ``run(inputs)``, compares every output (max abs / rel error; integers and bools
exactly), prints PASS or FAIL and exits non-zero on a mismatch.
"""

from __future__ import annotations

from .naming import literal

__all__ = ["BASELINE_DIR", "BASELINE_FILE", "test_section"]

BASELINE_DIR = "baseline"
BASELINE_FILE = "baseline.npz"

_TEST = '''

# ---- standalone test: python {script} ------------------------------------------------------
BASELINE = os.path.join(HERE, {baseline_dir}, {baseline_file})
INPUTS = {inputs}
OUTPUTS = {outputs}
ATOL, RTOL = {atol}, {rtol}


def load_baseline(path=BASELINE):
    """The inputs and golden outputs, in the graph's order."""
    with np.load(path, allow_pickle=False) as data:
        return [data[k] for k in INPUTS], [data[k] for k in OUTPUTS]


def compare(name, got, want, atol=ATOL, rtol=RTOL):
    """Print the errors of one output; True when it matches (integers and bools exactly)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype.kind != want.dtype.kind:
        print(f"{{name}}: got {{got.dtype}}{{list(got.shape)}}, "
              f"expected {{want.dtype}}{{list(want.shape)}} -> MISMATCH")
        return False
    exact = want.dtype.kind in "biu"
    diff = np.abs(got.astype("float64") - want.astype("float64"))
    scale = np.abs(want.astype("float64"))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(scale, 1e-30)).max()) if diff.size else 0.0
    if exact:
        ok = bool(np.array_equal(got, want))
    else:
        ok = bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    kind = "exact" if exact else f"atol={{atol:g}} rtol={{rtol:g}}"
    status = "ok" if ok else "MISMATCH"
    print(f"{{name}}: max abs err {{max_abs:.3g}}, max rel err {{max_rel:.3g}} "
          f"({{kind}}) -> {{status}}")
    return ok


def main():
    inputs, golden = load_baseline()
    outputs = run(inputs)
    if len(outputs) != len(golden):
        print(f"got {{len(outputs)}} outputs, expected {{len(golden)}}")
        print("FAIL")
        return 1
    results = [compare(n, g, w) for n, g, w in zip(OUTPUTS, outputs, golden)]
    print("PASS" if all(results) else "FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def test_section(script: str, inputs: list[str], outputs: list[str], atol: float,
                 rtol: float) -> str:
    """The test part of a generated script (inputs/outputs: baseline keys, i.e. aliases)."""
    return _TEST.format(script=script, baseline_dir=literal(BASELINE_DIR),
                        baseline_file=literal(BASELINE_FILE), inputs=literal(list(inputs)),
                        outputs=literal(list(outputs)), atol=literal(float(atol)),
                        rtol=literal(float(rtol)))
