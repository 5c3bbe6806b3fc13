"""What runs a built module: the VirtualMachine (vm.py), struct info checks of values
(match.py), the program a build makes (program.py), memory plans (plan.py, plan_code.py,
native_run.py), packed functions (packed.py), runtime values (arrays.py) and the kernels'
worker pool (threads.py)."""
