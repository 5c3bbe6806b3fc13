"""The int8 kernels: GEMM (gemm.py), convolutions (conv.py, conv_tasks.py, dwconv.py), batched
matmul (bmm.py), element-wise and lookup-table ops (eltwise.py, lut.py), pools, rows, layouts,
and the task split the worker pool runs (tasks.py)."""
