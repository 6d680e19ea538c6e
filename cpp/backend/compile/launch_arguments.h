// The arguments of one launch of an Inductor-generated kernel (kernel_launch.h), checked and
// translated on the host. The bindings (bindings/compile.cpp) only convert Python objects into
// C++ values; everything a launch decides about those values is here: which argument kinds a
// kernel may take, how many arguments a call must pass, that every buffer is on one device, the
// translation of device addresses to kernel addresses (runtime/memory.h), and the one-element CPU
// tensors a kernel reads as host scalars (copied at the call, as CUDA's Inductor passes them).
//
// Thread rules: a KernelSignature is immutable once made and may be shared by any threads. A
// LaunchArguments belongs to the host thread that fills it; launch() consumes it (it may be
// called without the GIL: nothing here touches Python).
// Ownership: a KernelSignature holds the address of the kernel's trampoline (its library stays
// loaded, kernel_launch.h) and its name, interned until the process exits. A LaunchArguments owns
// its slots and host scalar copies until launch() moves them into the queued task.
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/common/export.h"
#include "backend/compile/kernel_launch.h"

namespace vdev::backend {

// What a generated kernel takes: its vdev_kernel_entry trampoline and one kind per argument,
// 'p' a buffer pointer the kernel only reads (Inductor's const in_ptr), 'P' one it writes (out_ptr,
// in_out_ptr), 'i' an int64_t, 'f' a floating-point scalar
// (python/torch_vdev/compile/kernels.py writes them).
class VDEV_BACKEND_API KernelSignature {
 public:
  // Throws std::invalid_argument (ValueError) for a null entry or a kind other than p, i and f.
  KernelSignature(std::uintptr_t entry, std::string kinds, const std::string& name);

  KernelEntry entry() const { return entry_; }
  const std::string& kinds() const { return kinds_; }
  const char* name() const { return name_; }  // lives until the process exits

 private:
  KernelEntry entry_;
  std::string kinds_;
  const char* name_;
};

// The slots of one call of a kernel, filled argument by argument in any order (each once).
class VDEV_BACKEND_API LaunchArguments {
 public:
  // Throws rt::TypeMismatch (TypeError) unless `given` is the kernel's argument count.
  LaunchArguments(const KernelSignature& kernel, std::size_t given);

  // What a buffer argument's data pointer turned out to be.
  enum class Buffer {
    kDevice,   // vdev memory: the slot holds its kernel address
    kNoBytes,  // a null data pointer (a tensor without bytes): never dereferenced
    kHost,     // host memory (a CPU tensor): the caller passes it to add_host_scalar
  };

  // Buffer argument `i` whose data pointer is `data`. Device memory must be on the device of the
  // buffers before it (std::runtime_error, CPU's "Expected all tensors to be on the same device").
  Buffer add_buffer(std::size_t i, void* data);

  // Buffer argument `i` when add_buffer answered kHost: a CPU tensor of `numel` elements of
  // `element_size` bytes at `data`. One element is copied now and read by the kernel through its
  // slot; anything else throws std::invalid_argument (ValueError).
  void add_host_scalar(std::size_t i, const void* data, std::int64_t numel,
                       std::size_t element_size);

  void add_integer(std::size_t i, std::int64_t value) { slots_[i].integer = value; }
  void add_real(std::size_t i, double value) { slots_[i].real = value; }

  // Queues the kernel (launch_kernel) on the calling thread's current stream of the buffers'
  // device, or of its current device when no buffer has bytes (nothing is read or written).
  // `uses`: the tensors its buffer arguments are (in_ptr read, out_ptr and in_out_ptr written),
  // for the launch observers; the caller names them only while launch_observers() is set.
  void launch(c10::ArrayRef<TensorUse> uses = {}) &&;

 private:
  const KernelSignature& kernel_;
  KernelArgs slots_;
  HostScalars scalars_;
  int device_ = -1;  // the first buffer's with bytes
};

}  // namespace vdev::backend
