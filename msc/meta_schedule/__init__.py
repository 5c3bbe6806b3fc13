"""``meta_schedule`` for msc: make prim funcs faster by measured search (TVM's MetaSchedule
API: ``tune_tir``, ``tir_integration.compile_tir``, ``relax_integration.tune_relax``).

    from msc import meta_schedule as ms
    db = ms.tune_tir(mod, "llvm --num-cores=1", "out/tune", max_trials_global=32)
    sch = ms.tir_integration.compile_tir(db, mod, "llvm --num-cores=1")
"""

from . import relax_integration, space_generator, tir_integration
from .cost_model import GBTModel, RandomModel
from .database import JSONDatabase, TuningRecord
from .relax_integration import compile_relax, extract_tasks, tune_relax
from .space import apply_sketch, tunable_blocks
from .tune import TuneConfig, compile_tir, tune_tir

database = JSONDatabase  # TVM: ms.database.JSONDatabase

__all__ = [
           "GBTModel",
           "JSONDatabase",
           "RandomModel",
           "TuneConfig",
           "TuningRecord",
           "apply_sketch",
           "compile_relax",
           "compile_tir",
           "database",
           "extract_tasks",
           "relax_integration",
           "space_generator",
           "tir_integration",
           "tunable_blocks",
           "tune_relax",
           "tune_tir",
]
