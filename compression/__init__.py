"""msc compression package."""

from .prune import load_prune_plan, prune, save_prune_plan  # noqa: F401
from .quantize import quantize  # noqa: F401  (quantization: compression.quantize)
