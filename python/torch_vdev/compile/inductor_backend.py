"""Inductor's backend for vdev: its C++ code generator, with kernels queued on vdev streams.

Scheduling is Inductor's C++ (CPU) scheduling: the same fusion, vectorisation and OpenMP loops.
What differs is where a kernel runs. The wrapper code Inductor generates defines each vdev kernel
with ``torch_vdev.compile.kernels.cpp_kernel`` instead of CPU's ``async_compile.cpp_pybinding``,
and calls it as CPU code calls its kernels; the call queues the kernel on the current stream of
its tensors' device and returns (cpp/backend/compile/kernel_launch.h). Buffers are allocated by
the generated code with ``empty_strided(..., device="vdev:N")`` (the vdev caching allocator), and
operators Inductor does not lower run as eager vdev operators, queued on the same stream.

Registered by ``torch_vdev.compile``'s post-import hook once Inductor's ``compile_fx`` has been
imported (before anything is lowered), so ``import torch`` never imports Inductor. Everything this
module takes from Inductor is listed in ``torch_internals``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import torch

from torch_vdev import _C
from torch_vdev.compile import torch_internals

inductor_config = torch_internals.get("torch._inductor.config")
DeviceOpOverrides = torch_internals.get("torch._inductor.codegen.common.DeviceOpOverrides")
register_backend_for_device = torch_internals.get(
    "torch._inductor.codegen.common.register_backend_for_device"
)
register_device_op_overrides = torch_internals.get(
    "torch._inductor.codegen.common.register_device_op_overrides"
)
CppScheduling = torch_internals.get("torch._inductor.codegen.cpp.CppScheduling")
PythonWrapperCodegen = torch_internals.get("torch._inductor.codegen.wrapper.PythonWrapperCodegen")
SubgraphPythonWrapperCodegen = torch_internals.get(
    "torch._inductor.codegen.wrapper.SubgraphPythonWrapperCodegen"
)
CustomGraphModulePass = torch_internals.get(
    "torch._inductor.custom_graph_pass.CustomGraphModulePass"
)
register_benchmarker = torch_internals.get(
    "torch._inductor.runtime.benchmarking.register_benchmarker"
)
NopKernelSchedulerNode = torch_internals.get("torch._inductor.scheduler.NopKernelSchedulerNode")
V = torch_internals.get("torch._inductor.virtualized.V")

# The line Inductor's C++ scheduling writes to define a kernel in Python wrapper code
# (CppScheduling.define_kernel), and what vdev writes instead.
_CPU_DEFINITION = torch_internals.CPU_KERNEL_DEFINITION
_VDEV_DEFINITION = "vdev_kernels.cpp_kernel(async_compile, {name!r}, "
# Marks a kernel's source as vdev's: Inductor shares one definition between kernels of identical
# source, and a CPU kernel of the same source in the same graph must stay a CPU binding.
_VDEV_SOURCE_MARK = "// vdev kernel: queued on a vdev stream\n"


def kernel_threads() -> int:
    """OpenMP threads of a vdev kernel: what a stream worker runs a task queued now with
    (cpp/backend/common/task.h). Inductor writes the count into each kernel's parallel regions
    when it generates them."""
    return _C._kernel_threads()


def _with_kernel_threads(method: Any) -> Any:
    """Runs a code-generating method of the C++ scheduling with ``cpp.threads`` set to
    ``kernel_threads()``."""

    @functools.wraps(method)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        with inductor_config.patch({"cpp.threads": kernel_threads()}):
            return method(self, *args, **kwargs)

    return generate


class VdevScheduling(CppScheduling):
    """Inductor's C++ scheduling; kernels it defines are vdev kernels.

    One difference in when kernels are written: CPU's scheduling gathers consecutive nodes into
    one kernel group (one C++ module) and writes its call when the scheduler flushes, which it
    does before an extern node with a device but not before one without (stream and event
    operators, synchronize). On CPU that is harmless; on vdev the group's call would land after
    a record_event or synchronize that follows it in the program, and after the deletion of
    buffers it reads (an extern call frees the buffers whose last use has passed). So the group
    is also flushed when the next node that writes code has no device (``ready_to_flush``).

    Kernels are generated for the device's thread count (``kernel_threads``), not the host's.
    """

    def ready_to_flush(self) -> bool:
        """Asked by the scheduler after each node with a device: true if the next node that
        writes code (nop nodes write none) has no device or runs on another stream (a group is
        one kernel call, written in one stream's context), or is unknown (flushing is always
        safe; only the grouping into modules changes), or if CPU's scheduling asks for it (a
        group with too many arguments)."""
        if super().ready_to_flush():
            return True
        scheduler = self.scheduler
        nodes, current = scheduler.nodes, scheduler.current_node
        if self._positions is None or self._positions[0] is not nodes:
            self._positions = (nodes, {id(node): i for i, node in enumerate(nodes)})
        index = self._positions[1].get(id(current))
        if index is None or nodes[index] is not current:
            return True
        streams = scheduler.node_to_stream
        for node in itertools.islice(nodes, index + 1, None):
            if not isinstance(node, NopKernelSchedulerNode):
                return node.get_device() is None or streams.get(node, 0) != streams.get(current, 0)
        return True

    # The scheduler's node list and each node's position in it (ready_to_flush looks ahead).
    _positions: tuple[list[Any], dict[int, int]] | None = None

    codegen_node = _with_kernel_threads(CppScheduling.codegen_node)
    codegen_template = _with_kernel_threads(CppScheduling.codegen_template)
    flush = _with_kernel_threads(CppScheduling.flush)

    def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
        return super().define_kernel(_VDEV_SOURCE_MARK + src_code, nodes, kernel_args)


class _VdevWrapperCode:
    """What vdev changes in Inductor's Python wrapper code, for graphs and their subgraphs (control
    flow operators, at any depth): kernel definitions, kernel calls and buffer allocations."""

    def define_kernel(self, kernel_name: str, kernel_body: str, *args: Any, **kwargs: Any) -> None:
        body = vdev_definition(kernel_name, kernel_body)
        super().define_kernel(kernel_name, body, *args, **kwargs)  # type: ignore[misc]

    def make_allocation(
        self,
        name: str,
        device: torch.device,
        dtype: Any,
        shape: Any,
        stride: Any,
        *a: Any,
        **kw: Any,
    ) -> str:
        line = super().make_allocation(name, device, dtype, shape, stride, *a, **kw)  # type: ignore[misc]
        if device.type != "vdev":
            return line
        # Inductor writes device='vdev' for devices it has no allocator function for and relies
        # on the device guard around the code: name the index as well, so that a buffer lands on
        # its tensors' device whatever the current device is.
        return line.replace("device='vdev'", f"device='{device}'", 1)

    def _generate_kernel_call_helper(
        self,
        kernel_name: str,
        call_args: Any,
        *,
        device: Any = None,
        triton: bool = True,
        **kw: Any,
    ) -> None:
        device = device or V.graph.get_current_device_or_throw()
        if device.type == "vdev" and not triton:
            # As CPU calls its kernels: the launcher picks the stream when it is called.
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))  # type: ignore[attr-defined]
            return
        super()._generate_kernel_call_helper(  # type: ignore[misc]
            kernel_name, call_args, device=device, triton=triton, **kw
        )


class VdevWrapperCodegen(_VdevWrapperCode, PythonWrapperCodegen):
    """Python wrapper code whose vdev kernels are stream launchers."""

    @staticmethod
    def create(
        is_subgraph: bool,
        subgraph_name: str | None,
        parent_wrapper: PythonWrapperCodegen | None,
        partition_signatures: Any = None,
    ) -> PythonWrapperCodegen:
        if is_subgraph:
            assert subgraph_name is not None and parent_wrapper is not None
            return VdevSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return VdevWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.header.splice("import torch_vdev.compile.kernels as vdev_kernels")


class VdevSubgraphWrapperCodegen(_VdevWrapperCode, SubgraphPythonWrapperCodegen):
    """Wrapper code of a subgraph: its kernels are defined in the parent's header."""


def vdev_definition(kernel_name: str, kernel_body: str) -> str:
    """A kernel definition as vdev writes it: a kernel VdevScheduling generated (its source has
    the mark) becomes a vdev launcher; any other (a CPU kernel in the same graph) is left as is."""
    if _VDEV_SOURCE_MARK not in kernel_body:
        return kernel_body
    if not kernel_body.startswith(_CPU_DEFINITION):
        raise RuntimeError(
            f"torch.compile on vdev: Inductor defined kernel {kernel_name} as "
            f"{kernel_body[:60]!r}..., not with {_CPU_DEFINITION!r} (torch {torch.__version__}; "
            "vdev supports the C++ kernels of torch 2.13's Python wrapper)"
        )
    return _VDEV_DEFINITION.format(name=kernel_name) + kernel_body[len(_CPU_DEFINITION) :]


class UnsupportedWrapper:
    """Inductor's C++ and FX wrappers (``cpp_wrapper=True``, ``fx_wrapper=True``): not built for
    vdev; compiling with them raises, naming the setting."""

    supports_caching = False
    setting = ""

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"torch.compile on vdev: Inductor's {cls.setting} is not supported; vdev compiles "
            f"with the default Python wrapper (torch._inductor.config.{cls.setting} = False)"
        )


class UnsupportedCppWrapper(UnsupportedWrapper):
    setting = "cpp_wrapper"


class UnsupportedFxWrapper(UnsupportedWrapper):
    setting = "fx_wrapper"


class VdevDeviceOpOverrides(DeviceOpOverrides):
    """The device calls Inductor writes into generated code."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_vdev._C import _current_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.vdev.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.vdev.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.vdev.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.vdev.current_stream()"


class CodegenIdentity(CustomGraphModulePass):
    """Names vdev's code generation in the key of Inductor's on-disk caches (FX graph cache,
    AOT autograd cache), which hold generated wrapper code: code generated by another version of
    this backend is never reused. Inductor keys a graph with the uuid of the custom pass of each
    device it registered; the pass itself leaves the graph unchanged."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        pass

    def uuid(self) -> str:
        digest = hashlib.sha256()
        for path in sorted(Path(__file__).parent.glob("*.py")):  # everything this package decides
            digest.update(path.read_bytes())
        # Generated kernels hold their thread count: a change of it must not reuse them.
        return f"torch_vdev-{digest.hexdigest()}-threads{kernel_threads()}"


def benchmark_until_done(
    benchmarker: Any, _callable: Any, warmup: int = 25, rep: int = 100, **kwargs: Any
) -> float:
    """Inductor's autotuning timer for vdev: milliseconds per call of the queued work, from the
    call until every device has run it (the host returns before the work is done, and the work
    may be on any device), over at most 1,000 calls."""

    def timed(calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            _callable()
        for device in range(torch.vdev.device_count()):
            torch.vdev.synchronize(device)
        return (time.perf_counter() - start) * 1e3 / calls

    estimate = max(timed(1), 1e-3)
    timed(min(1000, max(1, int(warmup / estimate))))
    return timed(min(1000, max(1, int(rep / estimate))))


_registered = False
_lock = threading.Lock()


def register() -> None:
    global _registered
    with _lock:
        if not _registered:
            _register()
            _registered = True


def _register() -> None:
    from torch_vdev.compile import inductor_device_rules

    inductor_device_rules.apply()
    register_device_op_overrides("vdev", VdevDeviceOpOverrides())
    register_backend_for_device(
        "vdev",
        VdevScheduling,
        VdevWrapperCodegen,
        UnsupportedCppWrapper,
        UnsupportedFxWrapper,
        device_custom_pass=CodegenIdentity(),
    )
    register_benchmarker("vdev", benchmark_until_done, override=True)
