"""How each call of a built program runs, decided once at build time: the order of an op's
facts (resolve.py: native kernel, compiled TIR legalization, numpy) and the calls into the
runtime (callouts.py: call_tir, packed calls, print, assert). ``relax.build`` (../build.py)
asks both for every call."""
