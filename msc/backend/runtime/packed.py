"""Global registry of packed functions: Python callables that Relax calls by name.

``R.call_dps_packed("env.linear", (x, w), out_sinfo)`` and ``R.call_pure_packed("env.relu",
x, sinfo_args=...)`` look their function up here, at call time, so an override registered
after the build takes effect on the next call. Arguments are zero-copy numpy arrays; with
destination passing the preallocated outputs come last::

    @register_func("env.linear")
    def linear(x, w, out):                 # call_dps_packed: write into out
        np.matmul(x, w.T, out=out)

    @register_func("env.relu", override=True)
    def relu(x):                           # call_pure_packed: return the result
        return np.maximum(x, 0)

    get_global_func("env.relu")(np.ones(3))
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...errors import RuntimeCallError, ValidationError

__all__ = ["get_global_func", "list_global_func_names", "register_func", "remove_global_func"]

_FUNCS: dict[str, Callable] = {}
_LOCK = threading.Lock()


def register_func(name: str | Callable, f: Callable | None = None, override: bool = False):
    """Register ``f`` as ``name``; without ``f``, return a decorator (TVM's signature).

    ``@register_func`` on a function uses its ``__name__``. Registering a taken name raises
    ValidationError unless ``override=True``.
    """
    if callable(name) and f is None:  # bare @register_func
        return register_func(name.__name__, name, override)
    if not isinstance(name, str) or not name:
        raise ValidationError(f"packed function names are non-empty strings, got {name!r}")

    def register(func: Callable) -> Callable:
        if not callable(func):
            raise ValidationError(f"cannot register {type(func).__name__} as a function",
                                  key=name)
        with _LOCK:
            if name in _FUNCS and not override:
                raise ValidationError(f"packed function {name!r} is already registered",
                                      key=name, hint="pass override=True to replace it")
            _FUNCS[name] = func
        return func

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name``; unknown names raise (or give None if allowed)."""
    func = _FUNCS.get(name)
    if func is None and not allow_missing:
        raise missing_error(name)
    return func


def missing_error(name: str, where: str | None = None) -> RuntimeCallError:
    known = ", ".join(sorted(_FUNCS)) or "(none)"
    return RuntimeCallError(f"no packed function named {name!r} is registered", key=name,
                            node=where, hint=f"register it with relax.register_func({name!r}); "
                                             f"registered: {known}")


def list_global_func_names() -> list[str]:
    return sorted(_FUNCS)


def remove_global_func(name: str) -> None:
    with _LOCK:
        _FUNCS.pop(name, None)


def lookup(name: str) -> Callable | None:
    """Registry lookup used by the VM on every call (no error handling on the fast path)."""
    return _FUNCS.get(name)
