// Copies that involve vdev tensors: aten::_copy_from and aten::_copy_from_and_resize, and the one
// host read of a single value, aten::_local_scalar_dense (.item()), which waits like a blocking
// device -> host copy.
//
// PyTorch's copy_ hands every copy with a PrivateUse1 side to _copy_from(src, dst). Every copy runs
// on the current stream of its vdev device, with CUDA's rules for what returns early:
//   host -> device   non_blocking from pinned, dense memory: returns once queued; the task reads
//                    it. Otherwise (blocking, or a pageable or non-dense source) waits for the
//                    stream, then copies: CUDA synchronizes the stream before a copy from pageable
//                    memory, so non_blocking=True is synchronous in fact there, and the sync debug
//                    mode reports it (CUDA's does not).
//   device -> host   non_blocking into pinned, dense memory: returns once queued. Otherwise waits
//                    for the stream, then copies (reported by the sync debug mode likewise).
//   device -> device always queued (same device: on its current stream; across devices: on the
//                    source device's current stream, with a two-way event barrier between the two
//                    devices' current streams, as CUDA's copy kernel does).
// A blocking copy waits only for the stream it uses. Same-dtype contiguous copies are one memcpy
// (synchronous ones of 2 MiB or more: CPU's copy_, split among the intra-op threads); anything
// else (dtype conversion, broadcasting, strides) is a CPU copy_ between CPU aliases of the device
// bytes (backend/common/cpu_alias.h). Queued copies retain the pinned host blocks they read
// or write (never Storages, backend/memory/retained_memory.h), so no pinned block is reused while a
// copy that uses it is pending; device blocks are ordered by the caching allocator's stream
// semantics.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "backend/common/cpu_alias.h"
#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/task.h"
#include "backend/common/vdev_device.h"
#include "backend/common/worker_warnings.h"
#include "backend/memory/host_allocator.h"
#include "backend/memory/retained_memory.h"
#include "backend/memory/storage_resize.h"
#include "runtime/capture.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

using vdev::rt::CopyKind;

bool same_bytes_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().equals(b.sizes()) && a.is_contiguous() &&
         b.is_contiguous() && !a.is_conj() && !b.is_conj() && !a.is_neg() && !b.is_neg();
}

// What a queued copy must keep alive: the pinned blocks it uses (never their Storages, see
// backend/memory/retained_memory.h) and host staging tensors it owns. Null when there is nothing
// (device memory is ordered by the allocator): no allocation for device-to-device copies.
std::shared_ptr<void> keep_alive(std::initializer_list<at::Tensor> tensors,
                                 at::Tensor staging = at::Tensor()) {
  struct Keep {
    MemoryRefs refs;
    at::Tensor staging;
  };
  MemoryRefs refs;
  for (const at::Tensor& t : tensors) {
    if (auto ref = retain_memory(t)) refs.push_back(std::move(ref));
  }
  if (refs.empty() && !staging.defined()) return nullptr;
  return std::make_shared<Keep>(Keep{std::move(refs), std::move(staging)});
}

// The host side of a copy, as the task observers show it (the profiler's "Pinned" or "Pageable").
vdev::rt::HostMemory host_memory(const at::Tensor& host) {
  return is_pinned_ptr(host.data_ptr()) ? vdev::rt::HostMemory::kPinned
                                        : vdev::rt::HostMemory::kPageable;
}

// What the task observers see of a copy between host and device of `bytes` (a memcpy activity),
// for a synchronous copy (report_synchronous_copy).
vdev::rt::TaskTag host_copy_tag(vdev::rt::TaskKind kind, std::size_t bytes,
                                const at::Tensor& host) {
  vdev::rt::TaskTag tag{kind, static_cast<std::uint64_t>(bytes)};
  tag.host = host_memory(host);
  return tag;
}

// The launch of a copy of `uses` (source read, destination written) on `stream`: a memcpy of
// `kind` between host and device (`host`: the host side), or within the device.
Launch copy_launch(vdev::rt::Stream& stream, c10::ArrayRef<TensorUse> uses, vdev::rt::TaskKind kind,
                   std::size_t bytes, const at::Tensor* host) {
  return Launch{.stream = stream,
                .name = "copy_",
                .kind = kind,
                .uses = uses,
                .bytes = bytes,
                .host = host != nullptr ? host_memory(*host) : vdev::rt::HostMemory::kPageable,
                .operation = "aten::copy_"};
}

// A device-to-device copy that converts a dtype or follows strides: on CUDA a copy kernel
// (direct_copy_kernel_cuda, aten/src/ATen/native/cuda/Copy.cu), not a memcpy, which is only ever a
// same-dtype copy between contiguous tensors (memcpy_eligible there); so it is a kernel here too,
// named like CUDA's.
constexpr const char* kCopyKernelName = "direct_copy_kernel";

// Queues dst.copy_(src) between CPU tensors (aliases of device bytes or host tensors) as the work
// `launch` describes (a memcpy between host and device, a copy kernel).
void enqueue_cpu_copy(const Launch& launch, at::Tensor dst_cpu, at::Tensor src_cpu,
                      std::shared_ptr<void> keep) {
  queue_launch(launch, [dst_cpu, src_cpu, keep = std::move(keep)]() mutable {
    dst_cpu.copy_(src_cpu);  // plain CPU tensors: queue_launch runs it below autograd
  });
}

// A synchronous copy of this many bytes or more runs as CPU's copy_ between the host tensor and
// a CPU alias of the device bytes, which splits it among the calling thread's intra-op threads
// (one memcpy copied 64 MiB at 0.8x of CPU's speed on two cores; at::parallel_for compiled here,
// without OpenMP, would run serially). Below it, one memcpy costs less than copy_'s dispatch.
constexpr std::size_t kParallelCopyBytes = std::size_t{2} << 20;

bool one_memcpy(const at::Tensor& src, const at::Tensor& dst) {
  return same_bytes_layout(src, dst) && dst.nbytes() < kParallelCopyBytes;
}

// A blocking copy runs on the calling thread once the stream is idle; in a profile it is the
// stream's memcpy activity all the same (CUDA's cudaMemcpy shows on the device's timeline).
void report_synchronous_copy(const vdev::rt::Stream& stream, const vdev::rt::TaskTag& tag,
                             std::int64_t start) {
  if (start == 0) return;
  vdev::rt::report_host_run("copy_", stream.device(), stream.id(), tag, start);
}

// A copy from pageable memory reads it at the call: a graph could not read it again at replay, so
// CUDA refuses to capture it, and so does vdev.
void reject_pageable_capture(vdev::rt::Stream& stream) {
  if (C10_LIKELY(stream.capture_id() == 0)) return;
  if (std::shared_ptr<vdev::rt::Capture> c = vdev::rt::capture_of(stream)) {
    VDEV_RT(vdev::rt::fail_capture(
        *c, "copy_ from pageable host memory to device",
        "a copy from pageable host memory cannot be captured in a graph (a replay could not read "
        "the memory again); copy from pinned memory (Tensor.pin_memory()) instead"));
  }
}

// A host side a copy engine can read or write while the host runs on: pinned, dense memory. Any
// other (pageable memory, or a pinned tensor with gaps, which CUDA's copy stages through a
// pageable contiguous copy) makes a non_blocking copy synchronous in fact, on CUDA as on vdev.
bool asynchronous_host_side(const at::Tensor& host) {
  return is_pinned_ptr(host.data_ptr()) && host.is_non_overlapping_and_dense();
}

// A copy that waits: reported by the sync debug mode, its non_blocking=True hidden
// synchronization too (which CUDA's does not report).
void note_copy_wait(bool non_blocking, bool to_device, const at::Tensor& host,
                    c10::DeviceIndex device) {
  const char* name = nullptr;
  if (!non_blocking) {
    name = to_device ? "copy_ from host to device, non_blocking=False"
                     : "copy_ from device to host, non_blocking=False";
  } else if (!is_pinned_ptr(host.data_ptr())) {
    name = to_device ? "copy_ from pageable host memory to device, non_blocking=True (waits, as on "
                       "CUDA)"
                     : "copy_ from device to pageable host memory, non_blocking=True (waits, as on "
                       "CUDA)";
  } else {
    name = to_device ? "copy_ from non-dense pinned host memory to device, non_blocking=True "
                       "(waits, as on CUDA)"
                     : "copy_ from device to non-dense pinned host memory, non_blocking=True "
                       "(waits, as on CUDA)";
  }
  note_synchronizing_operation(name, device);
}

void copy_host_to_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  vdev::rt::Stream& stream = current_runtime_stream(dst.device().index());
  if (!non_blocking || !asynchronous_host_side(src)) {
    if (non_blocking) reject_pageable_capture(stream);  // CUDA's reason, before the wait's
    // CUDA synchronizes the stream before a copy from pageable memory ("API synchronization
    // behavior"), then stages the bytes: the copy has happened when the call returns.
    note_copy_wait(non_blocking, /*to_device=*/true, src, dst.device().index());
    wait_then_reraise_warnings([&] { VDEV_RT(stream.synchronize()); });
    observe_host_run({"aten::copy_", {{src, Access::kRead}, {dst, Access::kWrite}}});
    const std::int64_t start = vdev::rt::task_tracing() ? vdev::rt::trace_clock_ns() : 0;
    if (one_memcpy(src, dst)) {
      vdev::rt::memcpy_host_to_device(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    } else {
      cpu_alias(dst).copy_(src);
    }
    report_synchronous_copy(
        stream, host_copy_tag(vdev::rt::TaskKind::kMemcpyHtoD, dst.nbytes(), src), start);
    return;
  }
  const TensorUse uses[] = {{src, Access::kRead}, {dst, Access::kWrite}};
  const Launch launch =
      copy_launch(stream, uses, vdev::rt::TaskKind::kMemcpyHtoD, dst.nbytes(), &src);
  if (same_bytes_layout(src, dst)) {
    queue_copy(launch, dst.data_ptr(), src.data_ptr(), CopyKind::HostToDevice,
               keep_alive({dst, src}));
    return;
  }
  enqueue_cpu_copy(launch, cpu_alias(dst), host_view(src), keep_alive({dst, src}));
}

void copy_device_to_host(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  vdev::rt::Stream& stream = current_runtime_stream(src.device().index());
  if (!non_blocking || !asynchronous_host_side(dst)) {
    // The driver completes a copy into pageable memory before returning (CUDA's
    // cudaMemcpyAsync), so non_blocking=True waits as well.
    note_copy_wait(non_blocking, /*to_device=*/false, dst, src.device().index());
    wait_then_reraise_warnings([&] { VDEV_RT(stream.synchronize()); });
    observe_host_run({"aten::copy_", {{src, Access::kRead}, {dst, Access::kWrite}}});
    const std::int64_t start = vdev::rt::task_tracing() ? vdev::rt::trace_clock_ns() : 0;
    if (one_memcpy(src, dst)) {
      vdev::rt::memcpy_device_to_host(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    } else {
      at::Tensor d = dst;
      d.copy_(cpu_alias(src));
    }
    report_synchronous_copy(
        stream, host_copy_tag(vdev::rt::TaskKind::kMemcpyDtoH, dst.nbytes(), dst), start);
    return;
  }
  const TensorUse uses[] = {{src, Access::kRead}, {dst, Access::kWrite}};
  const Launch launch =
      copy_launch(stream, uses, vdev::rt::TaskKind::kMemcpyDtoH, dst.nbytes(), &dst);
  if (same_bytes_layout(src, dst)) {
    queue_copy(launch, dst.data_ptr(), src.data_ptr(), CopyKind::DeviceToHost,
               keep_alive({src, dst}));
    return;
  }
  enqueue_cpu_copy(launch, host_view(dst), cpu_alias(src), keep_alive({src, dst}));
}

void copy_device_to_device(const at::Tensor& src, const at::Tensor& dst) {
  const auto src_dev = src.device().index();
  const auto dst_dev = dst.device().index();
  vdev::rt::Stream& stream = current_runtime_stream(src_dev);
  vdev::rt::Stream* dst_stream = nullptr;
  if (src_dev != dst_dev) {
    // Two-way barrier: the copy waits for work already queued on the destination's stream, and
    // the destination's stream waits for the copy.
    dst_stream = &current_runtime_stream(dst_dev);
    order_after(stream, *dst_stream);
  }
  const TensorUse uses[] = {{src, Access::kRead}, {dst, Access::kWrite}};
  // Nothing to keep alive: both sides are device memory, ordered by the caching allocator.
  if (same_bytes_layout(src, dst)) {
    queue_copy(copy_launch(stream, uses, vdev::rt::TaskKind::kMemcpyDtoD, dst.nbytes(), nullptr),
               dst.data_ptr(), src.data_ptr(), CopyKind::DeviceToDevice);
  } else {
    // Strided or converting: a copy kernel (on CUDA too, across devices with peer access).
    enqueue_cpu_copy({.stream = stream,
                      .name = kCopyKernelName,
                      .uses = c10::ArrayRef<TensorUse>(uses),
                      .elements = static_cast<std::uint64_t>(dst.numel()),
                      .operation = "aten::copy_"},
                     cpu_alias(dst), cpu_alias(src), nullptr);
  }
  if (dst_stream != nullptr) order_after(*dst_stream, stream);
}

at::Tensor vdev_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const bool src_vdev = self.device().type() == kVdev;
  const bool dst_vdev = dst.device().type() == kVdev;
  TORCH_CHECK(src_vdev || self.device().is_cpu(), "vdev: cannot copy from ", self.device(), " to ",
              dst.device(), ": only cpu <-> vdev and vdev <-> vdev copies are supported");
  TORCH_CHECK(dst_vdev || dst.device().is_cpu(), "vdev: cannot copy from ", self.device(), " to ",
              dst.device(), ": only cpu <-> vdev and vdev <-> vdev copies are supported");
  // CPU's and CUDA's copy_ (a TensorIterator) broadcast the source to the destination's shape and
  // raise at the call otherwise, an empty destination included (before, vdev returned for one,
  // and the queued copy failed later or not at all).
  if (!self.sizes().equals(dst.sizes())) {
    const std::vector<int64_t> shape = at::infer_size(dst.sizes(), self.sizes());
    TORCH_CHECK(dst.sizes().equals(shape), "output with shape ", dst.sizes(),
                " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  }
  if (dst.numel() == 0) return dst;
  // The overlap checks of the TensorIterator CPU and CUDA copies build (copy_impl in
  // aten/src/ATen/native/Copy.cpp), which copy_ skips for a device it hands to _copy_from. The
  // copies that write their own source unchanged (the same tensor or view) returned before.
  at::assert_no_internal_overlap(dst);
  if (src_vdev && dst_vdev) at::assert_no_partial_overlap(dst, self);
  if (src_vdev && dst_vdev) {
    copy_device_to_device(self, dst);
  } else if (dst_vdev) {
    copy_host_to_device(self, dst, non_blocking);
  } else {
    copy_device_to_host(self, dst, non_blocking);
  }
  return dst;
}

// Whether no two elements of the view share an address: with the dimensions sorted by stride,
// each stride reaches past everything the smaller ones span. (at::has_internal_overlap answers
// "too hard" for any non-dense view.)
bool without_overlap(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dimensions that matter
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements from the first to one past the last, for the dimensions so far
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

at::Tensor vdev_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  // Resize on dst's own device: the allocator works on the current device.
  if (dst.device().type() == kVdev) {
    const c10::DeviceGuard guard(dst.device());
    // at::native::cpu_fallback carries a written argument back through here: an out= tensor
    // the CPU kernel resized gets the layout the kernel chose (linalg_lstsq's column-major
    // solution, a view of a taller buffer when there are more equations than unknowns, as CPU
    // and CUDA give it), not a contiguous one. Any layout without overlap; the storage grows to
    // its extent.
    if (dst.sizes() != self.sizes() && without_overlap(self)) {
      resize_tensor_impl(dst.unsafeGetTensorImpl(), self.sizes(), self.strides());
    } else {
      resize_vdev_tensor(dst, self.sizes(), std::nullopt);
    }
  } else {
    dst.resize_(self.sizes());
  }
  return vdev_copy_from(self, dst, /*non_blocking=*/false);
}

at::Scalar vdev_local_scalar_dense(const at::Tensor& self) {
  // A host read of a device value waits, as on CUDA.
  note_synchronizing_operation("aten::_local_scalar_dense (.item())", self.device().index());
  sync_current_stream(self.device());
  observe_host_run({"aten::_local_scalar_dense", {{self, Access::kRead}}});
  return at::_local_scalar_dense(cpu_alias(self));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", vdev_copy_from);
  m.impl("_copy_from_and_resize", vdev_copy_from_and_resize);
  m.impl("_local_scalar_dense", vdev_local_scalar_dense);
}

// Lazily conjugated / negated sources must reach the kernels above with their bits: the generic
// Conjugate/Negative fallback would materialise them with clone(), which copies through
// _copy_from again and recurses forever. The kernels handle both bits (the CPU copy_ between
// aliases resolves them; the memcpy path is taken only without them).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace vdev::backend
