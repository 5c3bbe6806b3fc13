"""msc compression package."""
