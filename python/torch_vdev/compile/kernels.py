"""Compiling Inductor's generated C++ kernels for vdev, and loading them as stream launchers.

Inductor's C++ code generator (the CPU one) writes each kernel as ``extern "C" void kernel(...)``
over buffer pointers, ``int64_t`` sizes and ``float`` scalars. On CPU, Inductor compiles it with
Python bindings that call it on the calling thread with the tensors' data pointers. On vdev those
pointers are device addresses, which the host must not touch, and the work must run on a stream.
So vdev compiles the same source with a trampoline, ``vdev_kernel_entry``, that reads one 8-byte
slot per argument (the layout of ``KernelArg`` in cpp/backend/compile/kernel_launch.h) and calls
the kernel; the loaded kernel is a ``torch_vdev._C._CompiledKernel``, which fills the slots with
kernel addresses and queues the call on the current stream of its tensors' device.

The compilation itself is Inductor's (``CppCodeCache``: its compiler flags, vectorisation,
OpenMP, on-disk cache and compile worker pool), with a cache of its own so that the same source is
never handed out as a CPU binding. What this module takes from Inductor is listed in
``torch_internals``.
"""

from __future__ import annotations

import ctypes
from typing import Any

from torch_vdev import _C
from torch_vdev.compile import torch_internals
from torch_vdev.compile.index_checks import guard_index_checks

AsyncCompile = torch_internals.get("torch._inductor.async_compile.AsyncCompile")
get_compile_threads = torch_internals.get("torch._inductor.async_compile.get_compile_threads")
CppCodeCache = torch_internals.get("torch._inductor.codecache.CppCodeCache")
# The header Inductor precompiles for CPU's kernel bindings (a classmethod, bound).
_cpu_bindings_header = torch_internals.get(
    "torch._inductor.codecache.CppPythonBindingsCodeCache._get_uncompiled_header"
)
LambdaFuture = torch_internals.get("torch._inductor.codecache.LambdaFuture")
clear_on_fresh_cache = torch_internals.get("torch._inductor.codecache.clear_on_fresh_cache")

# Argument types Inductor's C++ kernels take besides pointers (cpp_argdefs: sizes are INDEX_TYPE,
# int64_t; unbacked float symbols are float), mapped to the slot member that carries them.
_INTEGER_TYPES = frozenset({"int64_t", "long", "int", "int32_t", "uint64_t", "uintptr_t", "bool"})
_REAL_TYPES = frozenset({"float", "double"})


class UnsupportedKernelArgument(RuntimeError):
    pass


def _kind(kernel_name: str, argtype: str) -> str:
    base = argtype.replace("const ", "").strip()
    if base.endswith("*"):
        # Inductor declares what a kernel only reads const (in_ptr), what it writes not (out_ptr,
        # in_out_ptr): the sanitizer's reads and writes (P).
        return "p" if "const" in argtype else "P"
    if base in _INTEGER_TYPES:
        return "i"
    if base in _REAL_TYPES:
        return "f"
    raise UnsupportedKernelArgument(
        f"torch.compile on vdev: kernel {kernel_name} takes an argument of type '{argtype}', "
        f"which vdev cannot pass (pointers, {', '.join(sorted(_INTEGER_TYPES))} and "
        f"{', '.join(sorted(_REAL_TYPES))} are supported)"
    )


def trampoline(argtypes: list[str], kinds: str) -> str:
    """C++ source of ``vdev_kernel_entry``: unpacks the slots and calls ``kernel``."""
    member = {"p": "pointer", "P": "pointer", "i": "integer", "f": "real"}
    args = ",\n        ".join(
        f"static_cast<{t.replace('const ', '') if k not in 'pP' else t}>(a[{n}].{member[k]})"
        for n, (t, k) in enumerate(zip(argtypes, kinds, strict=True))
    )
    return f"""
// vdev: the entry point cpp/backend/compile/kernel_launch.h calls on a stream worker, one 8-byte
// slot per argument of kernel() (the layout of vdev::backend::KernelArg).
union VdevKernelArg {{ void* pointer; long long integer; double real; }};
static_assert(sizeof(VdevKernelArg) == 8, "slots are 8 bytes");
extern "C" __attribute__((visibility("default"))) void vdev_kernel_entry(const VdevKernelArg* a) {{
    kernel({args});
}}
"""


@clear_on_fresh_cache
class VdevKernelCodeCache(CppCodeCache):
    """Inductor's C++ code cache, with a cache of its own (the sources differ from CPU's by the
    trampoline, so the libraries never mix) and the flags of Inductor's CPU kernel bindings."""

    cache: dict[str, Any] = {}
    cache_clear = staticmethod(cache.clear)
    cpp_compile_command_flags = {"include_pytorch": False, "shared": True}

    @classmethod
    def _get_uncompiled_header(cls, device: str) -> str | None:
        """The header Inductor precompiles for CPU's kernel bindings (its C++ prefix, which every
        kernel includes first): with it each kernel compiles about 3x faster (0.7 s instead of
        2 s here), and a graph's compile time is mostly its kernels' (``CppCodeCache`` has none)."""
        return _cpu_bindings_header(device)


def _launcher(kernel_name: str, kinds: str, library: Any) -> Any:
    entry = ctypes.cast(library.vdev_kernel_entry, ctypes.c_void_p).value
    return _C._CompiledKernel(entry, kinds, kernel_name)


def cpp_kernel(
    async_compile: AsyncCompile, kernel_name: str, argtypes: list[str], source: str
) -> Any:
    """What the generated wrapper calls to define a vdev kernel (in place of CPU's
    ``async_compile.cpp_pybinding``): the launcher, or a future of it that
    ``async_compile.wait`` resolves when kernels compile in worker processes."""
    kinds = "".join(_kind(kernel_name, t) for t in argtypes)
    parallel = get_compile_threads() > 1
    load = VdevKernelCodeCache.load_async(
        guard_index_checks(source) + trampoline(argtypes, kinds),
        device_type="cpu",
        submit_fn=async_compile.submit if parallel else None,
    )
    if parallel:
        return LambdaFuture(lambda: _launcher(kernel_name, kinds, load()))
    return _launcher(kernel_name, kinds, load())
