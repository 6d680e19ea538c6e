// CPU views of vdev tensors: how kernels reach device bytes.
//
// cpu_alias(t) returns a CPU tensor with t's sizes, strides and dtype whose data pointer is the
// runtime's kernel address of t's data. It does not copy and does not own: the caller keeps `t`
// alive for as long as the alias is used. CPU kernels run on such aliases compute directly on
// device memory, which is how every vdev kernel does its work.
//
// Thread rules: stateless; callable from any thread (including stream workers).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

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
  at::Tensor make() const;
  // The same bytes seen the same way (address, sizes, strides, dtype, conj/neg bits). Views of no
  // bytes are never the same: empty tensors share the null address but never overlap.
  bool same_view(const AliasSpec& o) const {
    return data == o.data && dtype == o.dtype && conj == o.conj && neg == o.neg &&
           sizes == o.sizes && strides == o.strides && !has_zero_size();
  }
  bool has_zero_size() const {
    for (int64_t s : sizes) {
      if (s == 0) return true;
    }
    return false;
  }
};

// A non-owning CPU view of a host tensor's bytes (same sizes, strides, conj/neg bits) that shares
// no Storage with it, for queued tasks (they retain the memory separately,
// backend/memory/retained_memory.h).
at::Tensor host_view(const at::Tensor& host_tensor);

}  // namespace vdev::backend
