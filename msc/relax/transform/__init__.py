"""Module transforms with TVM's names and call style::

    mod = relax.transform.BindParams("main", params)(mod)
    mod = relax.transform.FoldConstant()(mod)
    mod = relax.transform.Sequential([FoldConstant(), DeadCodeElimination()])(mod)
"""

from .base import FunctionPass, ModulePass, PassContext, Sequential, module_pass
from .bind_params import BindParams, bind_params
from .dead_code_elimination import DeadCodeElimination, remove_all_unused
from .expand_tuple_arguments import ExpandTupleArguments
from .fold_constant import FoldConstant, fold_constant
from .legalize_ops import LegalizeOps, get_pipeline

__all__ = [
    "BindParams",
    "DeadCodeElimination",
    "ExpandTupleArguments",
    "FoldConstant",
    "FunctionPass",
    "LegalizeOps",
    "ModulePass",
    "PassContext",
    "Sequential",
    "bind_params",
    "fold_constant",
    "get_pipeline",
    "module_pass",
    "remove_all_unused",
]
