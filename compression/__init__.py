"""msc compression package."""

from .quantize import quantize  # noqa: F401  (quantization: compression.quantize)
