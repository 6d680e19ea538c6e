# As accelerate's: the package re-exports the harness's globals, copied at its import.
from .testing import (  # noqa: F401
    device_count,
    get_backend,
    memory_allocated_func,
    require_multi_device,
    require_non_cpu,
    require_single_device,
    torch_device,
)
