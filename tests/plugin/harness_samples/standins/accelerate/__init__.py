"""Stand-in for accelerate (see ../README.md)."""

from .state import PartialState  # noqa: F401  (as accelerate: its package imports the state)

__version__ = "1.15.0"
