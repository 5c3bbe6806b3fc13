"""TIR PrimFuncs to native code: schedule (schedule.py), statements (codegen.py), expressions
and operators (exprs.py, ops.py, math.py), and the checked, cached entry (compile.py)."""
