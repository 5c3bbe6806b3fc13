"""One process-wide LLVM JIT for msc kernels.

:func:`get_jit` returns the shared :class:`JIT`: it owns one MCJIT execution engine for the host
CPU (name and features queried from LLVM, never assumed) and a :class:`KernelCache`. Each call
to :meth:`JIT.compile` turns one LLVM module into one :class:`CodeLibrary`::

    lib = get_jit().compile(module, ["msc_add_f32"])     # llvmlite.ir.Module or IR text
    add = lib.cfunc("msc_add_f32", None, c_void_p, c_void_p, c_int64)

Compiling means: parse, O3 pass pipeline, emit an object file for the host, store it in the
kernel cache, load it into the engine. A cache hit skips straight to the load. Code is never
unloaded: the engine lives for the whole process, so addresses stay valid.

Symbols share one namespace per engine. Entry points must be unique across compiled units, and
every other function must have internal/private linkage (checked), so two units can never
silently bind to each other's helpers.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from ...errors import BuildError
from .cache import KernelCache, cache_key

__all__ = ["ISA_ENV", "JIT", "CodeLibrary", "HostTarget", "capped_target", "generated_entry",
           "get_jit", "host_target", "vector_lanes"]

OPT_LEVEL = 3
# Bumped when the way objects are produced changes, so old cache entries stop matching.
_FORMAT = "msc-jit-1"
# Widest float vector the host runs at full speed, first match wins.
_VECTOR_LANES = (("avx512f", 16), ("avx2", 8), ("avx", 8))
_EXPORTED = {"external"}
# $MSC_CPU_ISA caps the host's instruction set: (LLVM's generic CPU, feature prefixes removed)
ISA_ENV = "MSC_CPU_ISA"
_ISA_CAPS = {"avx2": ("x86-64-v3", ("avx512", "avx10", "amx", "evex512")),
             # AVX-512 (VNNI included where the host has it) without AMX: an AMD Zen 4 / 5
             # or an Ice Lake on a Sapphire Rapids host
             "avx512": ("x86-64-v4", ("amx", "avx10"))}


@dataclass(frozen=True)
class HostTarget:
    """What the code is compiled for; every field is part of the kernel cache key."""

    triple: str
    cpu: str
    features: str

    def has(self, feature: str) -> bool:
        return f"+{feature}" in self.features.split(",")

    def key_parts(self) -> tuple[str, ...]:
        llvm_version = ".".join(map(str, llvm.llvm_version_info))
        return (self.triple, self.cpu, self.features, llvmlite.__version__, llvm_version,
                f"O{OPT_LEVEL}", _FORMAT)


@cache
def host_target() -> HostTarget:
    """Initialise LLVM's native target once and describe the host CPU (capped to an older
    instruction set when ``$MSC_CPU_ISA`` names one, see :func:`capped_target`)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    host = HostTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      llvm.get_host_cpu_features().flatten())
    return capped_target(host, os.environ.get(ISA_ENV, ""))


def capped_target(target: HostTarget, isa: str) -> HostTarget:
    """``target`` without the features newer than ``isa`` ("avx2": no AVX-512, AVX10 or AMX;
    "avx512": no AMX or AVX10; "" or "native": unchanged), so that an AVX-512 machine compiles and picks kernels exactly
    as an AVX2-only one would (the tests run the AVX2 path this way). The CPU name becomes
    LLVM's generic level for ``isa``: a named CPU would bring its own features back."""
    if isa in ("", "native"):
        return target
    if isa not in _ISA_CAPS:
        raise BuildError(f"unknown {ISA_ENV} {isa!r}", hint=f"one of {sorted(_ISA_CAPS)}")
    cpu, dropped = _ISA_CAPS[isa]
    features = []
    for item in target.features.split(","):
        name = item[1:]
        features.append(f"-{name}" if item.startswith("+") and name.startswith(dropped)
                        else item)
    return HostTarget(target.triple, cpu, ",".join(features))


def vector_lanes(target: HostTarget | None = None) -> int:
    """fp32 lanes of the widest native vector: 16 (AVX-512), 8 (AVX/AVX2), else 4."""
    target = target or host_target()
    return next((lanes for feat, lanes in _VECTOR_LANES if target.has(feat)), 4)


def _target_machine(target: HostTarget) -> llvm.TargetMachine:
    return llvm.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.features, opt=OPT_LEVEL, jit=True)


class CodeLibrary:
    """The entry points of one compiled unit.

    The code lives in the JIT's engine; the library holds the JIT so that the engine (and the
    code) outlives every library and every ctypes function made from it.
    """

    def __init__(self, jit: JIT, name: str, key: str, addresses: dict[str, int],
                 from_cache: bool):
        self.jit = jit
        self.name = name
        self.key = key
        self.addresses = addresses
        self.from_cache = from_cache

    def __repr__(self) -> str:
        return f"CodeLibrary({self.name!r}, {sorted(self.addresses)}, from_cache={self.from_cache})"

    def address(self, symbol: str) -> int:
        try:
            return self.addresses[symbol]
        except KeyError:
            raise BuildError("no such entry point in this library", op=self.name, key=symbol,
                             hint=f"entry points: {sorted(self.addresses)}") from None

    def cfunc(self, symbol: str, restype, *argtypes):
        """A ctypes callable for ``symbol``; it keeps this library alive."""
        func = ctypes.CFUNCTYPE(restype, *argtypes)(self.address(symbol))
        func.library = self
        return func


class JIT:
    """An MCJIT engine for the host plus a kernel cache (``cache=None`` disables it)."""

    def __init__(self, cache: KernelCache | None = None):
        self.target = host_target()
        self.cache = cache
        self._machine = _target_machine(self.target)
        self._engine = self._create_engine()
        self._libraries: dict[str, CodeLibrary] = {}
        self._symbols: dict[str, str] = {}
        self._lock = threading.Lock()

    def _create_engine(self) -> llvm.ExecutionEngine:
        # The engine takes ownership of its target machine, so it gets its own.
        empty = llvm.parse_assembly("")
        empty.triple = self.target.triple
        return llvm.create_mcjit_compiler(empty, _target_machine(self.target))

    def compile(self, module: ir.Module | str, entry_points: Sequence[str],
                name: str | None = None) -> CodeLibrary:
        """Compile (or fetch from the cache) one module; returns its entry points' addresses.

        Compiling the same IR twice in one JIT returns the same library.
        """
        if isinstance(entry_points, str) or not entry_points:
            raise BuildError("entry_points must be a non-empty list of symbol names",
                             op=name, hint='e.g. jit.compile(module, ["msc_add_f32"])')
        text = str(module)
        name = name or getattr(module, "name", None) or entry_points[0]
        key = cache_key(text, *self.target.key_parts())
        with self._lock:
            if key in self._libraries:
                return self._libraries[key]
            self._check_symbols(entry_points, key, name)
            data = self.cache.load(key) if self.cache is not None else None
            from_cache = data is not None
            if data is None:
                data = self._codegen(text, entry_points, name)
                if self.cache is not None:
                    self.cache.store(key, data)
            addresses = self._load(data, entry_points, name)
            library = CodeLibrary(self, name, key, addresses, from_cache)
            self._libraries[key] = library
            self._symbols.update(dict.fromkeys(entry_points, key))
            return library

    def compile_generated(self, build: Callable[[], ir.Module], entry_points: Sequence[str],
                          sources: Sequence[str], params: tuple = (),
                          name: str | None = None) -> CodeLibrary:
        """Like :meth:`compile` for a module made by a Python generator, keyed by the
        generator's source instead of its IR, so a cache hit never builds the IR (building and
        printing a hand-written kernel module costs up to 0.6 s; loading it, milliseconds).

        ``sources``: the names of the Python modules whose code shapes the IR (the generator
        and its helpers; any edit to them changes the key); ``params``: everything else the
        IR depends on (lanes, config). The host target is part of the key as always.
        """
        name = name or entry_points[0]
        key = cache_key("generated", _source_digest(tuple(sources)), repr(params),
                        ",".join(entry_points), *self.target.key_parts())
        with self._lock:
            if key in self._libraries:
                return self._libraries[key]
            data = self.cache.load(key) if self.cache is not None else None
        if data is None:
            text = str(build())
            with self._lock:
                if key in self._libraries:
                    return self._libraries[key]
                self._check_symbols(entry_points, key, name)
                data = self._codegen(text, entry_points, name)
                if self.cache is not None:
                    self.cache.store(key, data)
                return self._add(data, entry_points, name, key, from_cache=False)
        with self._lock:
            if key in self._libraries:
                return self._libraries[key]
            self._check_symbols(entry_points, key, name)
            return self._add(data, entry_points, name, key, from_cache=True)

    def _add(self, data: bytes, entry_points, name: str, key: str, from_cache: bool):
        addresses = self._load(data, entry_points, name)
        library = CodeLibrary(self, name, key, addresses, from_cache)
        self._libraries[key] = library
        self._symbols.update(dict.fromkeys(entry_points, key))
        return library

    def _check_symbols(self, entry_points: Sequence[str], key: str, name: str) -> None:
        taken = [s for s in entry_points if self._symbols.get(s, key) != key]
        if taken:
            raise BuildError(f"entry point(s) {taken} already defined by another compiled unit",
                             op=name, hint="give each kernel variant a unique symbol name")

    def optimized_ir(self, text: str, name: str = "module") -> str:
        """The LLVM IR of ``text`` after the optimization the JIT runs before emitting code
        (for tests and for reading what LLVM made of a kernel: vector types, gathers)."""
        module = _parse(text, name)
        module.triple = self.target.triple
        module.data_layout = str(self._machine.target_data)
        _optimize(module, self._machine)
        return str(module)

    def _codegen(self, text: str, entry_points: Sequence[str], name: str) -> bytes:
        module = _parse(text, name)
        module.triple = self.target.triple
        module.data_layout = str(self._machine.target_data)
        _check_exports(module, entry_points, name)
        _optimize(module, self._machine)
        return self._machine.emit_object(module)

    def _load(self, data: bytes, entry_points: Sequence[str], name: str) -> dict[str, int]:
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        self._engine.finalize_object()
        addresses = {s: self._engine.get_function_address(s) for s in entry_points}
        missing = [s for s, addr in addresses.items() if not addr]
        if missing:  # only reachable through a cache entry that lost its symbols
            raise BuildError(f"compiled code defines no entry point(s) {missing}", op=name,
                             hint="clear the kernel cache (KernelCache().clear())")
        return addresses


def _parse(text: str, name: str) -> llvm.ModuleRef:
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as exc:
        raise BuildError(f"invalid LLVM IR: {exc}", op=name,
                         hint="dump the module text and check the reported line") from None
    return module


def _check_exports(module: llvm.ModuleRef, entry_points: Sequence[str], name: str) -> None:
    defined = {f.name: f.linkage.name for f in module.functions if not f.is_declaration}
    missing = [s for s in entry_points if defined.get(s) not in _EXPORTED]
    if missing:
        raise BuildError(f"module defines no entry point(s) {missing}", op=name,
                         hint="entry points need external linkage and must be defined")
    extra = [f for f, linkage in defined.items() if linkage in _EXPORTED and f not in entry_points]
    if extra:
        raise BuildError(f"functions {extra} are exported but not entry points", op=name,
                         hint="mark helpers linkage='internal' or list them as entry points")


def _optimize(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> None:
    tuning = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    passes = llvm.create_pass_builder(machine, tuning)
    passes.getModulePassManager().run(module, passes)


_shared: JIT | None = None
_shared_lock = threading.Lock()


@cache
def _source_digest(modules: tuple) -> str:
    """sha256 of the source files of these Python modules (read once per process)."""
    import hashlib
    import importlib

    digest = hashlib.sha256()
    for mod in modules:
        path = getattr(importlib.import_module(mod), "__file__", None)
        if path is None:
            raise BuildError(f"no source file for {mod!r}", hint="pass importable module names")
        with open(path, "rb") as f:
            digest.update(f.read())
        digest.update(b"\0")
    return digest.hexdigest()


def get_jit() -> JIT:
    """The process-wide JIT, created on first use with the default on-disk cache."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = JIT(KernelCache())
        return _shared


def generated_entry(build: Callable[[], ir.Module], symbol: str, sources: Sequence[str],
                    params: tuple, *argtypes):
    """The ctypes function (void) ``symbol`` of the module ``build`` makes, compiled by the
    process-wide JIT or fetched from its cache (:meth:`JIT.compile_generated`: keyed by the
    ``sources`` modules' code and ``params``): what a hand-written kernel binds once."""
    library = get_jit().compile_generated(build, [symbol], sources, params)
    return library.cfunc(symbol, None, *argtypes)
