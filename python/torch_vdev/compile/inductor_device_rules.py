"""How Inductor classifies vdev: a device with its own memory and streams (as a GPU), whose kernels
are written by the CPU code generator.

vdev kernels are written by Inductor's C++ (CPU) code generator, but Inductor decides a few
code-generation details by asking whether a device's type is "cpu", and takes the GPU (Triton)
branch for any other device. For vdev that branch is wrong, and some of it crashes on C++
kernels: in torch 2.13, loop reordering and the reindexing of a pointwise node into a reduction
(``Scheduler._try_reindex_pointwise_for_reduction``, skipped for nodes where
``BaseSchedulerNode.is_cpu()``) fail with "can't multiply sequence by non-int" on the C++
scheduling's node groups, and ``get_current_backend()`` answers "triton" (``config.cuda_backend``),
which selects Triton-only dtype upcasts and asserts. torch has no registration for "this device
generates CPU code", so vdev wraps the three predicates that encode it, once, when its Inductor
backend is registered (through ``torch_internals``, which lists each). A fourth predicate is about
the device rather than its code: ``device_need_guard`` decides, for GPU types only, whether
generated code enters a device guard and defines the streams a compiled function uses (``with
torch.cuda.stream(s)`` inside it): without it, a vdev graph that uses side streams names stream
variables it never defined. The wrapped predicates:

* ``torch._inductor.utils.get_current_backend`` (and the names other Inductor modules imported
  it as): "cpp" for vdev;
* ``torch._inductor.scheduler.BaseSchedulerNode.is_cpu``: true for vdev nodes;
* ``torch._inductor.ir.is_cpu``: true for vdev buffers (CPU's realisation heuristics);
* ``torch._inductor.utils.device_need_guard`` (as the scheduler imported it): true for vdev.

Decisions about memory and placement (allocation, pinned memory, device moves) ask about the
device itself and are not touched. ``tests/compile/test_compile.py`` checks the four.
"""

from __future__ import annotations

import functools
from typing import Any

from torch_vdev.compile import torch_internals

_applied = False


def apply() -> None:
    global _applied
    if _applied:
        return
    V = torch_internals.get("torch._inductor.virtualized.V")
    get_device_type = torch_internals.get("torch._inductor.ir.get_device_type")
    original_backend = torch_internals.get("torch._inductor.utils.get_current_backend")

    @functools.wraps(original_backend)
    def get_current_backend(device_type: str | None = None) -> str:
        if device_type is None:
            device_type = V.graph.get_current_device_or_throw().type
        if device_type == "vdev":
            return "cpp"
        return original_backend(device_type)

    for target in (
        "torch._inductor.utils.get_current_backend",
        "torch._inductor.codegen.common.get_current_backend",
        "torch._inductor.scheduler.get_current_backend",
        "torch._inductor.kernel.mm_common.get_current_backend",
    ):
        torch_internals.patch(target, get_current_backend)

    def node_is_cpu(self: Any) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "vdev")

    torch_internals.patch("torch._inductor.scheduler.BaseSchedulerNode.is_cpu", node_is_cpu)

    def is_cpu(x: Any) -> bool:
        return get_device_type(x) in ("cpu", "vdev")

    torch_internals.patch("torch._inductor.ir.is_cpu", is_cpu)

    original_need_guard = torch_internals.get("torch._inductor.utils.device_need_guard")

    @functools.wraps(original_need_guard)
    def device_need_guard(device: str) -> bool:
        return device == "vdev" or original_need_guard(device)

    torch_internals.patch("torch._inductor.utils.device_need_guard", device_need_guard)
    torch_internals.patch("torch._inductor.scheduler.device_need_guard", device_need_guard)
    _applied = True
