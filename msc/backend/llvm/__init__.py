"""The LLVM layer every native kernel goes through: one MCJIT engine per process (jit.py), the
on-disk object cache (cache.py) and the IR loop helpers kernel builders use (loops.py)."""
