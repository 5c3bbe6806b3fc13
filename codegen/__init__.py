"""msc codegen package."""
