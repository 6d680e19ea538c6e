"""Inductor's backend for vdev: its C++ code generator, with kernels queued on vdev streams.

Scheduling is Inductor's C++ (CPU) scheduling: the same fusion, vectorisation and OpenMP loops.
What differs is where a kernel runs. The wrapper code Inductor generates defines each vdev kernel
with ``torch_vdev.compile.kernels.cpp_kernel`` instead of CPU's ``async_compile.cpp_pybinding``,
and calls it as CPU code calls its kernels; the call queues the kernel on the current stream of
its tensors' device and returns (cpp/backend/compile/kernel_launch.h). Buffers are allocated by
the generated code with ``empty_strided(..., device="vdev:N")`` (the vdev caching allocator), and
operators Inductor does not lower run as eager vdev operators, queued on the same stream.

Registered lazily: Inductor asks ``torch.vdev`` for ``Scheduling`` and the wrapper codegens when it
first compiles (``init_backend_registration``), so ``import torch`` never imports Inductor.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch._inductor.codegen.common import (
    DeviceOpOverrides,
    register_backend_for_device,
    register_device_op_overrides,
)
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.custom_graph_pass import CustomGraphModulePass
from torch._inductor.runtime.benchmarking import register_benchmarker
from torch._inductor.virtualized import V

# The line Inductor's C++ scheduling writes to define a kernel in Python wrapper code
# (CppScheduling.define_kernel), and what vdev writes instead.
_CPU_DEFINITION = "async_compile.cpp_pybinding("
_VDEV_DEFINITION = "vdev_kernels.cpp_kernel(async_compile, {name!r}, "
# Marks a kernel's source as vdev's: Inductor shares one definition between kernels of identical
# source, and a CPU kernel of the same source in the same graph must stay a CPU binding.
_VDEV_SOURCE_MARK = "// vdev kernel: queued on a vdev stream\n"


class VdevScheduling(CppScheduling):
    """Inductor's C++ scheduling; kernels it defines are vdev kernels.

    One difference in when kernels are written: CPU's scheduling gathers consecutive nodes into
    one kernel and writes its call when the scheduler flushes, which it does before an extern
    node with a device but not before one without (stream and event operators, synchronize).
    On CPU that is harmless; on vdev the kernel's call would land after a record_event or
    synchronize that follows it in the program, and after the deletion of buffers it reads. So
    each node's kernel is written as soon as it is generated (one kernel per scheduler node).
    """

    def ready_to_flush(self) -> bool:
        return True

    def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
        wrapper = V.graph.wrapper_code
        with wrapper.defining_vdev_kernel():
            return super().define_kernel(_VDEV_SOURCE_MARK + src_code, nodes, kernel_args)


class VdevWrapperCodegen(PythonWrapperCodegen):
    """Python wrapper code whose vdev kernels are stream launchers."""

    def __init__(self) -> None:
        super().__init__()
        self._defining_vdev_kernel = False

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

    @contextlib.contextmanager
    def defining_vdev_kernel(self) -> Iterator[None]:
        self._defining_vdev_kernel = True
        try:
            yield
        finally:
            self._defining_vdev_kernel = False

    def write_header(self) -> None:
        super().write_header()
        self.header.splice("import torch_vdev.compile.kernels as vdev_kernels")

    def define_kernel(
        self,
        kernel_name: str,
        kernel_body: str,
        metadata: str | None = None,
        gpu: bool = True,
        cpp_definition: str | None = None,
    ) -> None:
        if getattr(self, "_defining_vdev_kernel", False):
            kernel_body = vdev_definition(kernel_name, kernel_body)
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def make_allocation(
        self,
        name: str,
        device: torch.device,
        dtype: Any,
        shape: Any,
        stride: Any,
        *args: Any,
        **kw: Any,
    ) -> str:
        line = super().make_allocation(name, device, dtype, shape, stride, *args, **kw)
        if device.type != "vdev":
            return line
        # Inductor writes device='vdev' for devices it does not know (it relies on a device guard
        # it emits only for GPUs): name the index, so buffers land on their tensors' device.
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
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(
            kernel_name, call_args, device=device, triton=triton, **kw
        )


class VdevSubgraphWrapperCodegen(SubgraphPythonWrapperCodegen):
    """Wrapper code of a subgraph (control flow operators): kernels are the parent's."""

    def defining_vdev_kernel(self) -> contextlib.AbstractContextManager[None]:
        return self.parent_wrapper.defining_vdev_kernel()

    def define_kernel(self, kernel_name: str, kernel_body: str, *args: Any, **kwargs: Any) -> None:
        if getattr(self.parent_wrapper, "_defining_vdev_kernel", False):
            kernel_body = vdev_definition(kernel_name, kernel_body)
        super().define_kernel(kernel_name, kernel_body, *args, **kwargs)

    make_allocation = VdevWrapperCodegen.make_allocation
    _generate_kernel_call_helper = VdevWrapperCodegen._generate_kernel_call_helper


def vdev_definition(kernel_name: str, kernel_body: str) -> str:
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
        return "torch_vdev-" + digest.hexdigest()


def benchmark_with_events(
    benchmarker: Any, _callable: Any, warmup: int = 25, rep: int = 100, **kwargs: Any
) -> float:
    """Inductor's autotuning timer for vdev: milliseconds per call of the queued work, timed with
    vdev events on the current stream (the host returns before the work is done)."""
    _callable()
    torch.vdev.synchronize()
    start = torch.vdev.Event(enable_timing=True)
    end = torch.vdev.Event(enable_timing=True)
    start.record()
    _callable()
    end.record()
    end.synchronize()
    estimate = max(start.elapsed_time(end), 1e-3)
    for _ in range(max(1, int(warmup / estimate))):
        _callable()
    calls = max(1, int(rep / estimate))
    start.record()
    for _ in range(calls):
        _callable()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
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
    register_benchmarker("vdev", benchmark_with_events, override=True)
    _registered = True


# What Inductor's init_backend_registration reads from torch.vdev (vdev/__init__.py says why
# these two only).
INDUCTOR_HOOKS = {"Scheduling": VdevScheduling, "PythonWrapperCodegen": VdevWrapperCodegen}
