"""tune_relax on a model of op calls: the tasks are the legalized kernels relax.build compiles
(no native kernel), compile_relax builds each with the database's best schedule, a workload
the database does not know keeps the default lowering, and the outputs stay numpy's."""

import numpy as np
import pytest

from msc import errors, relax
from msc import meta_schedule as ms
from msc.meta_schedule.space import apply_sketch
from msc.meta_schedule.tune import shares
from msc.relax import op as R
from msc.s_tir.schedule import Schedule

FAST = {"min_repeat_ms": 1.0, "num_trials_per_iter": 2, "seed": 0}


def conv1d_model():
    """conv1d (no native kernel: legalized), then a transpose (legalized), then a relu."""
    x = relax.Var("x", relax.TensorStructInfo((1, 8, 24), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        y = bb.emit(R.nn.conv1d(x, w, padding=1))
        bb.emit_func_output(bb.emit(R.permute_dims(y, (0, 2, 1))))
    return bb.get()


def conv1d_reference(x, w):
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    cols = np.stack([pad[:, :, k:k + x.shape[2]] for k in range(w.shape[2])], -1)
    return np.einsum("bclk,ock->bol", cols, w).transpose(0, 2, 1)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((1, 8, 24), "float32"), rng.standard_normal((16, 8, 3),
                                                                          "float32")


def tir_nodes(ex) -> dict:
    return {n.op: n for n in ex.programs["main"].walk() if n.path == "tir"}


def test_the_tasks_are_the_kernels_the_build_compiles_from_tir():
    mod = conv1d_model()
    tasks = ms.relax_integration.extract_tasks(mod, "llvm")
    built = tir_nodes(relax.build(mod))
    assert [t.task_name for t in tasks] == ["nn_conv1d", "permute_dims"]
    assert [t.mod["main"].script("main") for t in tasks] == \
        [built[op].tir.func.script("main") for op in ("nn.conv1d", "permute_dims")]


def test_the_build_runs_the_best_schedule_and_falls_back_for_unknown_ones(tmp_path, data):
    mod = conv1d_model()
    conv = ms.relax_integration.extract_tasks(mod, "llvm")[0].mod["main"]
    sch = Schedule(conv)
    apply_sketch(sch, analytic="vector")
    db = ms.database(str(tmp_path))
    db.commit_record(db.commit_workload(conv),
                     ms.TuningRecord(sch.trace, [1e-9], "llvm", []))  # the conv only
    ex = ms.relax_integration.compile_relax(db, mod, "llvm")
    nodes, default = tir_nodes(ex), tir_nodes(relax.build(mod))
    assert nodes["nn.conv1d"].tir.func.script("main") == sch.mod["main"].script("main")
    assert nodes["nn.conv1d"].tir.func.script("main") != conv.script("main")
    assert nodes["permute_dims"].tir.func.script("main") == \
        default["permute_dims"].tir.func.script("main")
    assert ex.stats["tuned"] == 1 and relax.build(mod).stats["tuned"] == 0
    got = relax.VirtualMachine(ex, relax.cpu())["main"](*data).numpy()
    np.testing.assert_allclose(got, conv1d_reference(*data), rtol=1e-4, atol=1e-5)


def test_a_winning_untuned_record_keeps_the_default_lowering(tmp_path):
    mod = conv1d_model()
    conv = ms.relax_integration.extract_tasks(mod, "llvm")[0].mod["main"]
    db = ms.database(str(tmp_path))
    db.commit_record(db.commit_workload(conv),
                     ms.TuningRecord(Schedule(conv).trace, [1e-9], "llvm", []))
    assert ms.relax_integration.compile_relax(db, mod, "llvm").stats["tuned"] == 0


def test_tune_relax_tunes_the_legalized_kernels_of_a_model(tmp_path, data):
    mod = conv1d_model()
    db = ms.relax_integration.tune_relax(mod, target="llvm --num-cores=1", share="equal",
                                         work_dir=str(tmp_path), max_trials_global=4, **FAST)
    assert [(r.name, r.trials) for r in db.results] == [("nn_conv1d", 2), ("permute_dims", 2)]
    ex = ms.relax_integration.compile_relax(db, mod, "llvm --num-cores=1")
    assert ex.stats["kernels"]["tir"] == 2
    lookup = ms.relax_integration.schedule_lookup(db, "llvm --num-cores=1")
    default = tir_nodes(relax.build(mod))
    for op, node in tir_nodes(ex).items():  # each runs its database's best, else the default
        want = lookup(default[op].tir.func) or default[op].tir.func
        assert node.tir.func.script("main") == want.script("main")
    got = relax.VirtualMachine(ex, relax.cpu())["main"](*data).numpy()
    np.testing.assert_allclose(got, conv1d_reference(*data), rtol=1e-4, atol=1e-5)


def test_trials_go_where_the_time_is():
    tasks = ms.relax_integration.extract_tasks(conv1d_model(), "llvm --num-cores=1")
    conv, transpose = ms.relax_integration.untuned_seconds(tasks, "llvm --num-cores=1")
    assert conv > transpose > 0  # 1152 multiply-adds per output row against one copy
    assert shares(10, 2, [conv, transpose])[0] > 5
    assert shares(10, 3, [0.6, 0.3, 0.1]) == [6, 3, 1]
    assert shares(7, 3, [0.5, 0.25, 0.25]) == [3, 2, 2]  # largest remainders
    assert shares(7, 3, [0.0, 1.0, 0.0]) == [0, 7, 0]
    assert shares(7, 3) == [3, 2, 2]


def test_an_unknown_share_is_refused(tmp_path):
    with pytest.raises(errors.ValidationError, match="share"):
        ms.relax_integration.tune_relax(conv1d_model(), work_dir=str(tmp_path), share="fair")


def test_a_model_without_legalized_kernels_has_no_tasks(tmp_path):
    x = relax.Var("x", relax.TensorStructInfo((4, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(R.reshape(x, (8, 4))))  # a free view: numpy
    db = ms.relax_integration.tune_relax(bb.get(), target="llvm", work_dir=str(tmp_path),
                                         max_trials_global=4, **FAST)
    assert db.results == [] and len(db) == 0
