"""The ``msc`` command line (``msc --help``)."""
