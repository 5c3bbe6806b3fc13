"""MLC lesson "Automatic Program Optimization" with msc imports: tune_tir on linear0 of the
end-to-end MLP, swap the tuned kernel into the module, and check the predictions.

    python examples/auto_tune.py [trials]
"""

import runpy
import sys
import tempfile
from pathlib import Path

import numpy as np

from msc import meta_schedule as ms  # TVM: from tvm import meta_schedule as ms
from msc import nd, relax, tir
from msc.relax.module import IRModule  # TVM: tvm.IRModule

E2E = runpy.run_path(str(Path(__file__).with_name("e2e_mlp.py")), run_name="lesson")


def main(trials: int = 8, work_dir: str | None = None) -> dict:
    params, images = E2E["make_mlp"]()
    nd_params = {k: nd.array(v) for k, v in params.items()}
    MyModuleMixture = E2E["MyModuleMixture"]
    mod_linear = IRModule.from_expr(MyModuleMixture["linear0"].with_attr("global_symbol",
                                                                         "main"))
    work_dir = work_dir or tempfile.mkdtemp(prefix="tune_")
    database = ms.tune_tir(mod_linear, target="llvm --num-cores=1", work_dir=work_dir,
                           max_trials_global=trials, num_trials_per_iter=min(trials, 8))
    sch = ms.tir_integration.compile_tir(database, mod_linear, "llvm --num-cores=1")
    sch.trace.show()
    result = database.results[0]
    print(f"linear0: untuned {result.untuned_secs * 1e3:.4f} ms, best tuned "
          f"{result.best_secs * 1e3:.4f} ms ({result.trials} trials)")

    MyModuleWithParams2 = relax.transform.BindParams("main", nd_params)(MyModuleMixture)
    new_func = sch.mod["main"].with_attr("global_symbol", "linear0")
    gv = MyModuleWithParams2.get_global_var("linear0")
    MyModuleWithParams2.update_func(gv, new_func)
    vm = relax.VirtualMachine(relax.build(MyModuleWithParams2, target="llvm"), relax.cpu())
    preds = np.array([np.argmax(vm["main"](nd.array(img)).numpy()) for img in images])
    expected = np.array([np.argmax(E2E["numpy_mlp"](img, params["w0"], params["b0"],
                                                    params["w1"], params["b1"]))
                         for img in images])
    print("tuned MLP predictions:", preds.tolist())
    if not np.array_equal(preds, expected):
        raise SystemExit(f"tuned module predicts {preds.tolist()}, numpy {expected.tolist()}")
    assert isinstance(sch, tir.Schedule)
    return {"predictions": preds, "result": result, "trace": str(sch.trace)}


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
