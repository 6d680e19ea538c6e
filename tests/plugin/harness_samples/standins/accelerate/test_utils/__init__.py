# As accelerate's: the package re-exports the harness's globals, copied at its import.
from .testing import (  # noqa: F401
    DEFAULT_LAUNCH_COMMAND,
    device_count,
    memory_allocated_func,
    require_multi_device,
    require_non_cpu,
    require_single_device,
    torch_device,
)
