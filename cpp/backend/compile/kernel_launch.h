// Launching the C++ kernels Inductor generates for vdev (python/torch_vdev/compile) on streams.
//
// Inductor's C++ code generator writes each kernel as `extern "C" void kernel(<typed arguments>)`:
// buffer pointers, int64_t sizes and float scalars. vdev compiles it with a trampoline,
// `extern "C" void vdev_kernel_entry(const KernelArg* args)`, which reads one 8-byte slot per
// argument and calls the kernel (the generator of the trampoline is in
// python/torch_vdev/compile/kernels.py and follows the layout of KernelArg). A launch fills the
// slots on the host, with buffer pointers already translated to kernel addresses (the checks and
// the translation are launch_arguments.h's, runtime/memory.h's), and queues the call on the
// current stream of the kernel's device: the host returns at once, exactly as for an eager
// operator, and the kernel runs on the stream's worker on the device bytes, without opening the
// host-side protection.
//
// Thread rules: launch_kernel is called on any host thread; the kernel runs on the stream worker.
// Ownership: the kernel's shared library must stay loaded while a launch may be queued (Inductor's
// code cache never unloads one). The queued task holds no device memory: buffers freed after the
// launch go back to their stream's pool and are reused only by later work on that stream, as for
// operator tasks (backend/memory/device_cache.h).
#pragma once

#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>

#include "backend/common/export.h"
#include "backend/common/launch.h"

namespace vdev::backend {

// One argument slot of a generated kernel: a buffer pointer (a kernel address), an int64_t
// size, or a floating-point scalar (passed as double, narrowed by the trampoline).
union KernelArg {
  void* pointer;
  std::int64_t integer;
  double real;
};
static_assert(sizeof(KernelArg) == 8, "the trampoline reads 8-byte slots");

using KernelEntry = void (*)(const KernelArg* args);
using KernelArgs = c10::SmallVector<KernelArg, 12>;

// The value of a one-element CPU tensor a kernel reads through a pointer argument (Inductor lets
// 0-dim CPU tensors into device kernels, as scalars). Copied when the kernel is queued, as CUDA's
// Inductor passes such a tensor by value; the task points slot `slot` at its copy.
struct HostScalar {
  std::uint32_t slot;
  alignas(16) unsigned char bytes[16];  // the largest element: complex<double>
};
using HostScalars = c10::SmallVector<HostScalar, 1>;

// A copy of a kernel's name that lives until the process exits, for launch_kernel.
VDEV_BACKEND_API const char* kernel_task_name(const std::string& name);

// Queues entry(args) on the calling thread's current stream of `device`, with each of `scalars`
// in its slot. `name` (the kernel's name
// in the generated code, for errors and the profiler) must live until the process exits
// (kernel_task_name). An exception the kernel throws (Inductor's integer division by zero) fails
// the task, and is raised at the next synchronization as for an operator.
// `uses`: the tensors the kernel reads and writes, for the launch observers (common/launch.h).
VDEV_BACKEND_API void launch_kernel(KernelEntry entry, const char* name, c10::DeviceIndex device,
                                    KernelArgs args, HostScalars scalars = {},
                                    c10::ArrayRef<TensorUse> uses = {});

}  // namespace vdev::backend
