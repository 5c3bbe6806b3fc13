"""IRModule: a set of named functions (Relax functions, TIR prim funcs, externs)."""

from __future__ import annotations

from ..errors import ValidationError
from .expr import GlobalVar
from .printer.ir_module import module_to_script


class IRModule:
    """``mod["main"]``, ``mod[gv]``, ``mod.get_global_vars()``, ``mod.script()``.

    Functions are kept in insertion order; a GlobalVar is identified by its name.
    """

    def __init__(self, functions: dict | None = None, attrs: dict | None = None):
        self._funcs: dict[str, tuple[GlobalVar, object]] = {}
        self.attrs = dict(attrs or {})
        for key, func in (functions or {}).items():
            self[key] = func

    @staticmethod
    def from_expr(func, name: str = "main") -> IRModule:
        """A module holding ``func`` as ``name`` (TVM: ``IRModule.from_expr(f)``)."""
        return IRModule({name: func})

    @property
    def functions(self) -> dict:
        return FunctionMap({gv: f for gv, f in self._funcs.values()})

    def get_global_vars(self) -> list[GlobalVar]:
        return [gv for gv, _ in self._funcs.values()]

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._funcs:
            raise ValidationError(f"module has no function {name!r}", key=name,
                                  hint=f"functions: {', '.join(self._funcs) or '(none)'}")
        return self._funcs[name][0]

    def __getitem__(self, key):
        name = key.name_hint if isinstance(key, GlobalVar) else key
        return self._funcs[self.get_global_var(name).name_hint][1]

    def __setitem__(self, key, func) -> None:
        gv = key if isinstance(key, GlobalVar) else GlobalVar(str(key))
        existing = self._funcs.get(gv.name_hint)
        self._funcs[gv.name_hint] = (existing[0] if existing else gv, func)

    def __contains__(self, key) -> bool:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        return name in self._funcs

    def __iter__(self):
        return iter(self.functions.items())

    def __len__(self) -> int:
        return len(self._funcs)

    def update_func(self, gv: GlobalVar, func) -> None:
        if gv.name_hint not in self._funcs:
            raise ValidationError(f"module has no function {gv.name_hint!r} to update")
        self[gv] = func

    def add(self, name: str, func) -> GlobalVar:
        self[name] = func
        return self.get_global_var(name)

    def with_attr(self, key: str, value) -> IRModule:
        mod = IRModule(self.functions, {**self.attrs, key: value})
        return mod

    def copy(self) -> IRModule:
        return IRModule(self.functions, self.attrs)

    def script(self, show_meta: bool = False, **kwargs) -> str:
        return module_to_script(self, show_meta=show_meta, **kwargs)

    def show(self, show_meta: bool = False, **kwargs) -> None:
        print(self.script(show_meta=show_meta, **kwargs))

    def __repr__(self) -> str:
        return self.script()


class FunctionMap(dict):
    """``mod.functions``: GlobalVar -> function, hashed by identity as TVM's ``Map`` (its
    tests hold one and compare hashes to see whether a module was copied)."""

    __hash__ = object.__hash__
