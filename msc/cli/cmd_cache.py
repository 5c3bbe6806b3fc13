"""``msc cache [size|prune|clear]``: the on-disk cache of compiled kernels (backend/llvm/cache.py).

Only the cache's own entries (``*.mscobj`` and its temp files) are ever removed, so a wrong
``--dir`` cannot delete anything else.
"""

from __future__ import annotations

import json
import math

from ..errors import ValidationError
from .options import number_type

NAME = "cache"
HELP = ("show the size of the kernel cache, prune it (least recently used first) or clear "
        "it")
EPILOG = """examples:
  msc cache                          # folder, entries and size (same as: msc cache size)
  msc cache size --json
  msc cache prune --max-mb 200       # drop the least recently used entries until 200 MB fit
  msc cache clear                    # every entry (kernels are rebuilt on their next use)
  msc cache clear --dir /tmp/kernels
The folder is $MSC_CACHE_DIR, else ~/.cache/msc/kernels; $MSC_CACHE_MAX_MB bounds it after every
write, and is what prune uses when --max-mb is not given.
"""


megabytes = number_type(float, lambda v: 0 <= v < math.inf, "a number of megabytes >= 0")


def add_arguments(p) -> None:
    p.epilog = EPILOG
    p.add_argument("action", nargs="?", default="size", choices=("size", "prune", "clear"),
                   help="size (default): entries and bytes; prune: down to --max-mb; clear: all")
    p.add_argument("--dir", metavar="DIR", help="the cache folder (default: $MSC_CACHE_DIR, "
                                                "else ~/.cache/msc/kernels)")
    p.add_argument("--max-mb", type=megabytes, metavar="MB",
                   help="prune: the size to fit in, in MB (default $MSC_CACHE_MAX_MB)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _cache(args):
    from ..backend.llvm.cache import KernelCache, default_max_bytes

    if args.action == "prune" and args.max_mb is None and default_max_bytes() is None:
        raise ValidationError("prune needs a size", key="--max-mb",
                              hint="pass --max-mb MB (or set MSC_CACHE_MAX_MB)")
    max_bytes = None if args.max_mb is None else int(args.max_mb * (1 << 20))
    return KernelCache(args.dir, max_bytes=max_bytes)


def run(args) -> int:
    cache = _cache(args)
    before = cache.size_bytes()
    removed = 0
    if args.action == "prune":
        removed = cache.prune(cache.max_bytes)
    elif args.action == "clear":
        removed = cache.clear()
    report = {"dir": str(cache.directory), "entries": cache.count(),
              "bytes": cache.size_bytes(), "removed": removed, "freed_bytes": 0}
    report["freed_bytes"] = before - report["bytes"]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    line = f"{report['dir']}: {report['entries']} kernels, {_mb(report['bytes'])}"
    if args.action != "size":
        line += f" ({args.action}: removed {removed}, freed {_mb(report['freed_bytes'])})"
    print(line)
    return 0


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"
