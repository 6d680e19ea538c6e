"""Stand-in for safetensors (see ../README.md)."""

__version__ = "0.8.0"


class SafetensorError(Exception):
    pass
