"""tune_tir / compile_tir / tune_relax on small shapes with a few trials: the tuned function
computes the untuned one's values, the database is TVM's JSON-lines layout and a later run
reuses it, failing candidates are logged and skipped."""

import json
import logging

import numpy as np
import pytest

from msc import errors, relax
from msc import meta_schedule as ms
from msc.backend.lowering.compile import compile_prim_func
from msc.meta_schedule import search as search_mod
from msc.meta_schedule.runner import CandidateError
from msc.tir.parser import parse_tir_text

MM = '''
@T.prim_func
def main(A: T.Buffer((32, 48), "float32"), B: T.Buffer((48, 64), "float32"),
         C: T.Buffer((32, 64), "float32")):
    for i, j, k in T.grid(32, 64, 48):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''
FAST = {"min_repeat_ms": 1.0, "num_trials_per_iter": 2, "seed": 0}


@pytest.fixture
def mm():
    return parse_tir_text(MM)["main"]


def _run(func, a, b):
    out = np.zeros((a.shape[0], b.shape[1]), "float32")
    compile_prim_func(func)(a, b, out)
    return out


def test_tune_tir_records_and_compile_tir_replays_the_best_record(mm, tmp_path):
    db = ms.tune_tir(mm, "llvm --num-cores=1", str(tmp_path), max_trials_global=4, **FAST)
    result = db.results[0]
    assert result.trials == 4 and result.failures == 0 and len(db) == 5  # + the untuned
    workloads = (tmp_path / "database_workload.json").read_text().splitlines()
    records = [json.loads(line) for line in
               (tmp_path / "database_tuning_record.json").read_text().splitlines()]
    assert len(workloads) == 1 and len(records) == 5
    assert records[0][1][0] == [[], []]   # the untuned function: an empty trace
    index, (trace, run_secs, target, args_info) = records[1]
    assert index == 0 and run_secs[0] < 1e10
    assert target == {"kind": "llvm", "tag": "", "keys": ["cpu"], "num-cores": 1}  # TVM's
    assert trace[0][0] == ["GetSBlock", [], ["C", "main"], ["b0"]]
    assert args_info[0] == ["TENSOR", "float32", [32, 48]]
    sch = ms.tir_integration.compile_tir(db, mm, "llvm --num-cores=1")
    best = db.best(mm)
    assert best.mean_secs == min(r.mean_secs for r in db.get_all_tuning_records())
    assert sch.trace.as_json() == best.trace.as_json()   # the best record, replayed
    tuned = next(r for r in db.get_top_k(mm, 5) if r.trace.insts)
    tuned.trace.apply_to_schedule(replayed := ms.tir_integration.compile_tir(
        ms.database(str(tmp_path / "empty")), mm))
    assert "T.axis.reduce(48, k_0" in replayed.mod["main"].script()  # k is tiled
    assert "sample_perfect_tile" in str(replayed.trace)
    rng = np.random.default_rng(1)
    a, b = rng.random((32, 48), "float32"), rng.random((48, 64), "float32")
    for func in (sch.mod["main"], replayed.mod["main"]):
        np.testing.assert_allclose(_run(func, a, b), a @ b, rtol=1e-4)


def test_a_later_run_reuses_the_database(mm, tmp_path):
    ms.tune_tir(mm, "llvm", str(tmp_path), max_trials_global=3, **FAST)
    db = ms.tune_tir(mm, "llvm", str(tmp_path), max_trials_global=3, **FAST)
    traces = [json.dumps(r.trace.as_json()) for r in db.get_all_tuning_records()]
    assert len(traces) == 7 and len(set(traces)) == 7   # nothing measured twice
    assert db.results[0].trials == 3


def test_failing_candidates_are_logged_and_skipped(mm, tmp_path, monkeypatch, caplog):
    real = search_mod.measure
    calls = []

    def flaky(task, func, *args, **kw):
        calls.append(1)
        if len(calls) in (2, 3):  # after the untuned baseline: two bad candidates
            raise CandidateError("build", "injected failure")
        return real(task, func, *args, **kw)

    monkeypatch.setattr(search_mod, "measure", flaky)
    with caplog.at_level(logging.WARNING, logger="msc.meta_schedule"):
        db = ms.tune_tir(mm, "llvm", str(tmp_path), max_trials_global=4, **FAST)
    assert db.results[0].failures == 2 and db.results[0].trials == 4
    assert sum("injected failure" in r.message for r in caplog.records) == 2
    failed = [r for r in db.get_all_tuning_records() if not r.valid]
    assert len(failed) == 2 and failed[0].run_secs == [1e10] and "build" in failed[0].error
    assert db.best(mm).valid


def test_bad_database_lines_are_skipped(mm, tmp_path, caplog):
    ms.tune_tir(mm, "llvm", str(tmp_path), max_trials_global=2, **FAST)
    with open(tmp_path / "database_tuning_record.json", "a") as f:
        f.write("{not json\n[0, [[], [1.0]]]\n")
    with caplog.at_level(logging.WARNING, logger="msc.meta_schedule"):
        db = ms.database(str(tmp_path))
    assert len(db) == 3 and db.skipped == 2


def test_tune_relax_tunes_every_kernel_of_the_module(tmp_path):
    text = '''
@I.ir_module
class Module:
    @T.prim_func
    def mm(A: T.Buffer((16, 32), "float32"), B: T.Buffer((32, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
        for i, j, k in T.grid(16, 16, 32):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def relu(X: T.Buffer((16, 16), "float32"), Y: T.Buffer((16, 16), "float32")):
        for i, j in T.grid(16, 16):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor((16, 32), "float32"), w: R.Tensor((32, 16), "float32")):
        with R.dataflow():
            lv = R.call_tir(Module.mm, (x, w), R.Tensor((16, 16), dtype="float32"))
            gv = R.call_tir(Module.relu, (lv,), R.Tensor((16, 16), dtype="float32"))
            R.output(gv)
        return gv
'''
    mod = relax.from_script(text)
    db = ms.relax_integration.tune_relax(mod, target="llvm", work_dir=str(tmp_path),
                                         max_trials_global=4, share="equal", **FAST)
    assert [r.name for r in db.results] == ["mm", "relu"]
    assert [r.trials for r in db.results] == [2, 2]
    ex = ms.relax_integration.compile_relax(db, mod, target="llvm")
    vm = relax.VirtualMachine(ex, relax.cpu())
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((16, 32), "float32"), rng.standard_normal((32, 16), "float32")
    np.testing.assert_allclose(vm["main"](x, w).numpy(), np.maximum(x @ w, 0), rtol=1e-4,
                               atol=1e-5)


def test_the_gbt_cost_model_ranks_better_than_random():
    rng = np.random.default_rng(0)
    x = rng.random((120, 6))
    y = np.sin(3 * x[:, 0]) + (x[:, 1] > 0.5) * 2 - x[:, 2] ** 2
    model = ms.GBTModel().fit(x[:80], y[:80])

    def rank_corr(pred):
        return np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(y[80:])))[0, 1]

    assert rank_corr(model.predict(x[80:])) > 0.8
    assert rank_corr(ms.RandomModel(0).predict(x[80:])) < 0.5


def test_popen_runner_survives_a_dying_worker(mm, tmp_path, monkeypatch, caplog):
    from msc.meta_schedule.popen_runner import PopenRunner

    real_read, reads = PopenRunner._read, []

    def read(self, timeout):
        reads.append(1)
        if len(reads) == 3:  # ready, 1st candidate, then the worker dies on the 2nd
            self.proc.kill()
            self.proc.wait()
        return real_read(self, timeout)

    monkeypatch.setattr(PopenRunner, "_read", read)
    with caplog.at_level(logging.WARNING, logger="msc.meta_schedule"):
        db = ms.tune_tir(mm, "llvm", str(tmp_path), max_trials_global=3, runner="popen",
                         **FAST)
    result = db.results[0]
    assert result.trials == 3 and result.failures == 1
    failed = [r for r in db.get_all_tuning_records() if not r.valid]
    assert len(failed) == 1 and failed[0].error.startswith("crash: the measuring process died")
    assert sum(r.valid for r in db.get_all_tuning_records()) == 3   # untuned + 2 candidates


CONV = '''
@T.prim_func
def main(X: T.Buffer((1, 8, 10, 10), "float32"), W: T.Buffer((16, 8, 3, 3), "float32"),
         Y: T.Buffer((1, 16, 8, 8), "float32")):
    for n, f, y, x, rc, rh, rw in T.grid(1, 16, 8, 8, 8, 3, 3):
        with T.block("Y"):
            vn, vf, vy, vx, vc, vh, vw = T.axis.remap("SSSSRRR", [n, f, y, x, rc, rh, rw])
            with T.init():
                Y[vn, vf, vy, vx] = T.float32(0)
            Y[vn, vf, vy, vx] = Y[vn, vf, vy, vx] + X[vn, vc, vy + vh, vx + vw] * W[vf, vc, vh, vw]
'''


def _parallel_loops(func) -> list:
    from msc.tir.function import For, walk_stmts

    return [s for s in walk_stmts(func.body) if isinstance(s, For) and s.kind == "parallel"]


@pytest.mark.parametrize("text", [MM, CONV], ids=["matmul", "conv"])
def test_every_candidate_has_a_parallel_outer_loop_when_tuning_for_two_threads(text):
    """MetaSchedule's ParallelizeVectorizeUnroll: with 2 threads no tile choice leaves the
    kernel serial; the parallel loop is the outermost one and splits into enough chunks."""
    func = parse_tir_text(text)["main"]
    specs, starts = search_mod.sketch_specs(func, threads=2)
    assert all(s.kind == "tile" or s.n == 2 for s in specs)   # no parallel coin left
    rng = __import__("random").Random(0)
    for decisions in starts + [search_mod._sample(rng, specs) for _ in range(12)]:
        tuned = search_mod.apply_candidate(func, decisions, threads=2).mod["main"]
        loops = _parallel_loops(tuned)
        assert len(loops) == 1 and loops[0] is tuned.body.body   # the root block's loop
        spatial = np.prod([d[0] * d[1] for s, d in zip(specs, decisions)
                           if s.kind == "tile" and s.n == 4])
        assert loops[0].extent.value >= min(spatial, 33)


def test_one_thread_keeps_the_sampled_parallel_choice(mm):
    specs, _ = search_mod.sketch_specs(mm, threads=1)
    serial = [0 if s.kind == "choice" else [s.extent, 1, 1, 1][:s.n] for s in specs]
    assert not _parallel_loops(search_mod.apply_candidate(mm, serial).mod["main"])
    parallel = serial[:-1] + [1]
    assert len(_parallel_loops(search_mod.apply_candidate(mm, parallel).mod["main"])) == 1


def test_the_target_thread_count_picks_the_space_and_the_records(mm, tmp_path):
    from msc.meta_schedule.target import same_target, target_threads

    assert target_threads("llvm --num-cores=2") == 2
    assert same_target("llvm --num-cores=2", "llvm") and not same_target(
        "llvm --num-cores=1", "llvm --num-cores=2")
    db = ms.tune_tir(mm, "llvm --num-cores=2", str(tmp_path), max_trials_global=2, **FAST)
    assert db.results[0].failures == 0
    best = ms.tir_integration.compile_tir(db, mm, "llvm --num-cores=2").mod["main"]
    assert len(_parallel_loops(best)) == 1 or not db.best(mm).trace.insts
    with pytest.raises(errors.ValidationError, match="num-cores"):
        target_threads("llvm --num-cores=zero")
