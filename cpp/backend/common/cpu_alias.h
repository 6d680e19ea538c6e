// CPU aliases of device bytes: how every kernel reaches device memory. One module for the three
// ways an alias is made:
//  * cpu_alias(t): at once, on the calling thread;
//  * AliasSpec: captured on the host without allocating, made on a stream worker (queued tasks;
//    place_aliases makes one CPU tensor of the same view passed twice);
//  * SharedCpuAliases: one CPU Storage per device Storage, so that CPU's overlap checks see what
//    overlaps, resizable as the device's storage is (the synchronous run of a call on the host).
//
// cpu_alias(t) returns a CPU tensor with t's sizes, strides and dtype whose data pointer is the
// runtime's kernel address of t's data. It does not copy and does not own: the caller keeps `t`
// alive for as long as the alias is used. CPU kernels run on such aliases compute directly on
// device memory, which is how every vdev kernel does its work.
//
// Thread rules: stateless; callable from any thread (including stream workers).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/Storage.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <unordered_map>
#include <utility>

namespace vdev::backend {

at::Tensor cpu_alias(const at::Tensor& vdev_tensor);

// A cpu_alias to be made later, on a stream worker: the kernel address and metadata, captured on
// the host without allocating. Making aliases on the worker keeps their allocations (TensorImpl,
// StorageImpl) on the thread that also frees them, which is what makes queueing cheap (glibc's
// malloc is slow for memory allocated on one thread and freed on another).
struct AliasSpec {
  void* data = nullptr;
  c10::SmallVector<int64_t, 5> sizes, strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool conj = false, neg = false;

  static AliasSpec of(const at::TensorBase& vdev_tensor);
  // Makes this the spec of `vdev_tensor` (in place: a spec inside a container is not moved).
  void set(const at::TensorBase& vdev_tensor);
  at::Tensor make() const { return make_at(data); }
  // The alias of this view at kernel address `address` instead of `data` (the express lane's tasks
  // keep one spec per call signature and the address per call, executor/express_task.h).
  at::Tensor make_at(void* address) const;
  // The same bytes seen the same way (address, sizes, strides, dtype, conj/neg bits). Views of no
  // bytes are never the same: empty tensors share the null address but never overlap.
  bool same_view(const AliasSpec& o) const { return data == o.data && same_layout(o); }
  // The same view, wherever its bytes are (all but the address).
  bool same_layout(const AliasSpec& o) const {
    return dtype == o.dtype && conj == o.conj && neg == o.neg && sizes == o.sizes &&
           strides == o.strides && !has_zero_size();
  }
  bool has_zero_size() const {
    for (int64_t s : sizes) {
      if (s == 0) return true;
    }
    return false;
  }
};

// Puts the aliases of `specs` (stack position, spec) on `stack`. The same view passed twice
// (x.add_(y) reaches a task as add.out(x, y, out=x)) becomes one CPU tensor, as on CPU: kernels
// then see that what they read is what they write, in-place semantics hold and CPU's own overlap
// checks apply (index_select(x, 0, i, out=x) raises).
void place_aliases(c10::ArrayRef<std::pair<std::size_t, AliasSpec>> specs,
                   torch::jit::Stack& stack);

// CPU aliases of vdev tensors that share one CPU Storage per device Storage, for running a call
// on the host (executor/host_run.h). The CPU Storage is resizable when the device's is: a kernel
// that grows an out= argument (cat(..., out=x)) moves that storage to host memory (CPU's resize
// copies the bytes); carry_back() then gives the device tensor its new bytes and metadata.
// The same tensor passed twice gets one alias, as on CPU.
// Not thread-safe; lives for one call on the dispatching thread.
class SharedCpuAliases {
 public:
  // The alias of `t`; other tensors (CPU, undefined) are returned as they are.
  at::Tensor of(const at::Tensor& t);

  // What the kernel did to `cpu` (an alias made by of(device)), carried to `device`: its storage
  // grown into host memory is copied back into the device storage, which `grow_device_storage`
  // resizes first (to the given byte size); changed sizes, strides or offset are set.
  template <typename GrowDeviceStorage>
  void carry_back(const at::Tensor& device, const at::Tensor& cpu, GrowDeviceStorage&& grow) {
    Shared& sh = shared_.at(device.storage().unsafeGetStorageImpl());
    if (sh.cpu.data() != sh.base) {
      grow(device.storage().unsafeGetStorageImpl(), sh.cpu.nbytes());
      copy_grown_bytes(device.storage(), sh);
    }
    carry_metadata(device, cpu);
  }

 private:
  struct Shared {
    c10::Storage cpu;
    void* base = nullptr;  // the kernel address it started at (null for a storage without bytes)
  };
  static void copy_grown_bytes(const c10::Storage& device, Shared& sh);
  static void carry_metadata(const at::Tensor& device, const at::Tensor& cpu);
  std::unordered_map<c10::StorageImpl*, Shared> shared_;
  std::unordered_map<c10::TensorImpl*, at::Tensor> tensors_;  // the alias made for each tensor
};

// A non-owning CPU view of a host tensor's bytes (same sizes, strides, conj/neg bits) that shares
// no Storage with it, for queued tasks (they retain the memory separately,
// backend/memory/retained_memory.h).
at::Tensor host_view(const at::Tensor& host_tensor);

}  // namespace vdev::backend
