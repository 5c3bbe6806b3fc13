"""``msc demo``: the end-to-end tour of msc, one step per capability (``steps.STEPS``).

The tour is a showcase, not part of the product: it sits above every other package (its
command-line steps run the ``msc`` command), nothing in msc imports it but the ``demo``
command, and that only when ``msc demo`` runs. Each step lives in a module named for its
topic (``int8.py``, ``onnx_export.py``, ...) and opens with ``shared.banner``.
"""
