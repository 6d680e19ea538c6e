from .other import infer_device  # noqa: F401  (as peft's: a copy made at import)
