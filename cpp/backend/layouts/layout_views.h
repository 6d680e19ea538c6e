// CPU views of vdev tensors in every layout, and CPU results made into vdev tensors: how CPU's
// sparse and quantized kernels reach device memory.
//
// A vdev tensor of a layout other than strided is metadata around dense vdev tensors:
//  * sparse COO: indices and values (at::SparseTensorImpl);
//  * sparse compressed (CSR, CSC, BSR, BSC): compressed indices, plain indices and values
//    (at::SparseCsrTensorImpl);
//  * quantized: a Storage of integers and a quantizer (at::QTensorImpl).
// Its CPU view is the same metadata around CPU aliases of those dense tensors (common/cpu_alias.h),
// so a CPU kernel computes directly on device memory. Members a kernel replaces (an out= sparse
// tensor gets new indices and values) are carried back: the vdev tensor gets device copies of
// the new members and the CPU tensor's sizes and flags.
//
// Thread rules: LayoutViews lives for one call on one thread (the dispatching thread or a stream
// worker); the device memory it views must not be written concurrently (the caller waited for,
// or is ordered after, the work that writes it).
#pragma once

#include <ATen/core/QuantizerBase.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <unordered_map>
#include <vector>

#include "backend/common/cpu_alias.h"

namespace vdev::backend {

// The dense vdev tensors `t` is made of (itself when it is strided and not quantized; its integer
// representation's bytes, as a uint8 view of its storage, when quantized).
std::vector<at::Tensor> dense_members(const at::Tensor& t);

class LayoutViews {
 public:
  // The CPU view of `t` (any layout); CPU and undefined tensors are returned as they are. The
  // same tensor passed twice gets one view.
  at::Tensor of(const at::Tensor& t);

  // What the kernel did to `cpu` (a view made by of(device)) carried to `device`: a strided
  // tensor's growth and metadata; a sparse tensor's sizes, dims, coalesced flag and the members
  // the kernel replaced.
  void carry_back(const at::Tensor& device, const at::Tensor& cpu);

  // Gives a CPU quantized tensor whose per-channel parameters are views made by this object
  // (copy_ gave it a vdev source's quantizer) CPU copies of them: the views die with the call.
  void own_quantizer(const at::Tensor& cpu);

  // A vdev copy of `cpu` on `device`, keeping the members that are views made by this object
  // (a sparse result that shares its input's indices keeps the device's indices).
  at::Tensor to_device(const at::Tensor& cpu, c10::Device device);

 private:
  at::Tensor dense(const at::Tensor& t);  // a dense member's CPU alias, remembered
  at::Tensor member_back(const at::Tensor& cpu, c10::Device device);
  SharedCpuAliases aliases_;
  std::unordered_map<c10::TensorImpl*, at::Tensor> views_;    // device tensor -> its view
  std::unordered_map<c10::TensorImpl*, at::Tensor> members_;  // member alias -> device member
  // The quantizer each quantized view was made with (a kernel that replaces it, copy_, is seen).
  std::unordered_map<c10::TensorImpl*, c10::intrusive_ptr<at::Quantizer>> view_quantizers_;
};

}  // namespace vdev::backend
