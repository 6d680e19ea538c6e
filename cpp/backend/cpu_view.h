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

namespace vdev::backend {

at::Tensor cpu_alias(const at::Tensor& vdev_tensor);

// A non-owning CPU view of a host tensor's bytes (same sizes, strides, conj/neg bits) that shares
// no Storage with it, for queued tasks (they retain the memory separately, backend/memory_ref.h).
at::Tensor host_view(const at::Tensor& host_tensor);

}  // namespace vdev::backend
