"""Stand-in for peft (see ../README.md)."""

__version__ = "0.21.2"
