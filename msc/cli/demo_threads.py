"""Demo step: the backend's kernels on every CPU of the process, bitwise equal to one thread."""

from __future__ import annotations

import time

from .demo import _banner


def _small_cnn():
    """conv 3x3 + relu, max pool, 1x1 conv, residual add + relu, channel shuffle: the kernels
    that split across threads (direct conv, pool, elementwise, permute)."""
    import numpy as np

    from .. import relax
    from ..relax import op as R

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.1
    w2 = rng.standard_normal((32, 32, 1, 1)).astype("float32") * 0.1
    x = relax.Var("x", relax.TensorStructInfo((1, 16, 64, 64), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), padding=1))))
            h = bb.emit(R.nn.max_pool2d(h, 3, 2, 1))
            h = bb.emit(R.nn.relu(bb.emit(R.add(h, bb.emit(R.nn.conv2d(h, relax.const(w2)))))))
            h = bb.emit(R.reshape(h, (1, 4, 8, 32, 32)))
            gv = bb.emit_output(R.permute_dims(h, (0, 2, 1, 3, 4)))
        bb.emit_func_output(gv)
    return bb.get(), rng.random((1, 16, 64, 64), dtype="float32")


def step_threads(out: str) -> None:
    """One build, run on 1 thread and on every CPU (the default): same bits, the time of each."""
    import numpy as np

    from .. import relax
    from ..backend.runtime.threads import cpu_threads, get_num_threads

    mod, x = _small_cnn()
    ex = relax.build(mod)
    _banner(f"Threads: default {get_num_threads()} (CPUs of this process: {cpu_threads()}), "
            "MSC_NUM_THREADS overrides")
    results, seconds = {}, {}
    for count in sorted({1, max(2, get_num_threads())}):
        f = relax.VirtualMachine(ex, relax.cpu(), num_threads=count)["main"]
        results[count] = f(x).numpy()
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            f(x)
            best = min(best, time.perf_counter() - start)
        seconds[count] = best
        print(f"num_threads={count}: {best * 1e3:.2f} ms (best of 5; other processes share "
              "the cores)")
    first, *others = results.values()
    if not all(np.array_equal(first, other) for other in others):
        raise SystemExit("demo: the thread count changed the result")
    print(f"bitwise equal across {sorted(results)} threads; output {first.shape}, kernels "
          f"{ex.stats['kernels']}")
