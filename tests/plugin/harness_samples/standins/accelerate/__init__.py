"""Stand-in for accelerate (see ../README.md)."""

__version__ = "1.15.0"
