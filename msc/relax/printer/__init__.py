"""TVMScript printer for msc Relax modules, in TVM 0.27's style, by what it prints:

- ``text.py``: floats, strings, PrimExprs, the commented script header;
- ``sinfo.py``: struct info annotations (``R.Tensor((1, 3), dtype="float32")``);
- ``calls.py``: the generic ``R.<op>(args, attrs, out_ty=...)`` form, from the op table;
- ``exprs.py``: expressions and functions (``expr_to_str``, ``function_to_script``);
- ``ir_module.py``: whole modules (``module_to_script``, what ``mod.script()`` returns);
- ``metadata.py``: the metadata section holding large constants by value.

The output parses back with :func:`msc.relax.from_script` into an equal module::

    text = module_to_script(mod, show_meta=True)
    sinfo_to_str(TensorStructInfo((1, 3), "float32"))   # 'R.Tensor((1, 3), dtype="float32")'

The IR classes print through ``msc/relax/text_form.py``, which the package points here.
"""

from .exprs import expr_to_str, function_to_script
from .ir_module import module_to_script
from .metadata import META_KEY, METADATA_NOTE
from .sinfo import sinfo_to_str
from .text import format_float

__all__ = [
    "METADATA_NOTE",
    "META_KEY",
    "expr_to_str",
    "format_float",
    "function_to_script",
    "module_to_script",
    "sinfo_to_str",
]
