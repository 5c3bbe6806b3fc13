"""msc frontends package."""
