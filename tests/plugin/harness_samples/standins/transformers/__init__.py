"""Stand-in for transformers (see ../README.md)."""

__version__ = "5.24.0"
