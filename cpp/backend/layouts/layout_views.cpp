#include "backend/layouts/layout_views.h"

#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_sparse_compressed_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>

#include <utility>

#include "backend/common/tensor_args.h"
#include "backend/memory/storage_resize.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

bool is_compressed(const at::Tensor& t) { return at::sparse_csr::is_sparse_compressed(t); }

// A quantizer whose per-channel parameters are `member(scales)`, `member(zero_points)`: the same
// quantization on another device.
template <typename Member>
at::QuantizerPtr quantizer_with(const at::QuantizerPtr& q, Member&& member) {
  const at::ScalarType st = q->scalar_type();
  switch (q->qscheme()) {
    case at::kPerTensorAffine: {
      auto* p = static_cast<at::PerTensorAffineQuantizer*>(q.get());
      return at::make_per_tensor_affine_quantizer(p->scale(), p->zero_point(), st);
    }
    case at::kPerChannelAffine: {
      auto* p = static_cast<at::PerChannelAffineQuantizer*>(q.get());
      return at::make_per_channel_affine_quantizer(member(p->scales()), member(p->zero_points()),
                                                   p->axis(), st);
    }
    case at::kPerChannelAffineFloatQParams: {
      auto* p = static_cast<at::PerChannelAffineFloatQParamsQuantizer*>(q.get());
      return c10::make_intrusive<at::PerChannelAffineFloatQParamsQuantizer>(
          st, member(p->scales()), member(p->zero_points()), p->axis());
    }
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "quantization scheme ", toString(q->qscheme()),
                                  " is not supported on vdev");
  }
}

// The Storage a quantized tensor on `device_storage`'s bytes has on the CPU: not owning, not
// resizable (a quantized kernel allocates its outputs; it does not grow its inputs).
c10::Storage cpu_storage_of(const c10::Storage& device_storage) {
  void* base =
      device_storage.data() == nullptr ? nullptr : vdev::rt::kernel_address(device_storage.data());
  return c10::Storage(c10::Storage::use_byte_size_t(), device_storage.nbytes(),
                      at::DataPtr(base, c10::Device(c10::kCPU)), nullptr, false);
}

}  // namespace

std::vector<at::Tensor> dense_members(const at::Tensor& t) {
  if (t.layout() == c10::kSparse) {
    const auto* impl = at::sparse::get_sparse_impl(t);
    return {impl->indices(), impl->values()};
  }
  if (is_compressed(t)) {
    const auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
    return {impl->compressed_indices(), impl->plain_indices(), impl->values()};
  }
  if (t.is_quantized()) {
    // The bytes the tensor spans, as uint8, for the sanitizer's and the allocator's view.
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    int64_t extent = t.numel() == 0 ? 0 : 1;
    for (int64_t d = 0; d < t.dim() && extent > 0; ++d) extent += (t.size(d) - 1) * t.stride(d);
    at::Tensor bytes = at::empty({0}, t.options().dtype(at::kByte).layout(c10::kStrided));
    bytes.set_(t.storage(), t.storage_offset() * itemsize, {extent * itemsize}, {1});
    return {bytes};
  }
  return {t};
}

at::Tensor LayoutViews::dense(const at::Tensor& t) {
  at::Tensor a = aliases_.of(t);
  members_.try_emplace(a.unsafeGetTensorImpl(), t);
  return a;
}

at::Tensor LayoutViews::of(const at::Tensor& t) {
  if (!is_vdev_tensor(t)) return t;
  if (t.layout() == c10::kStrided && !t.is_quantized()) return dense(t);
  auto [it, fresh] = views_.try_emplace(t.unsafeGetTensorImpl());
  if (!fresh) return it->second;
  const at::TensorOptions cpu = t.options().device(c10::kCPU);
  if (t.layout() == c10::kSparse) {
    const auto* impl = at::sparse::get_sparse_impl(t);
    it->second = at::_sparse_coo_tensor_with_dims_and_tensors(
        impl->sparse_dim(), impl->dense_dim(), t.sizes(), dense(impl->indices()),
        dense(impl->values()), cpu, impl->coalesced());
  } else if (is_compressed(t)) {
    const auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
    it->second = at::_sparse_compressed_tensor_unsafe(
        dense(impl->compressed_indices()), dense(impl->plain_indices()), dense(impl->values()),
        t.sizes(), t.scalar_type(), t.layout(), c10::Device(c10::kCPU), std::nullopt);
  } else {
    TORCH_CHECK(t.is_quantized(), "vdev: no CPU view for a tensor of layout ", t.layout());
    const at::QuantizerPtr q = quantizer_with(at::get_qtensorimpl(t)->quantizer(),
                                              [&](const at::Tensor& m) { return dense(m); });
    auto impl = c10::make_intrusive<at::QTensorImpl>(
        cpu_storage_of(t.storage()), c10::DispatchKeySet(c10::DispatchKey::QuantizedCPU), t.dtype(),
        q);
    impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    it->second = at::Tensor(std::move(impl));
    view_quantizers_.emplace(it->second.unsafeGetTensorImpl(), q);
  }
  return it->second;
}

at::Tensor LayoutViews::member_back(const at::Tensor& cpu, c10::Device device) {
  if (!cpu.defined()) return cpu;
  auto it = members_.find(cpu.unsafeGetTensorImpl());
  if (it != members_.end()) {
    aliases_.carry_back(it->second, cpu, resize_storage_for_host_write);
    return it->second;
  }
  return at::empty_strided(cpu.sizes(), cpu.strides(), cpu.options().device(device)).copy_(cpu);
}

void LayoutViews::carry_back(const at::Tensor& device, const at::Tensor& cpu) {
  const c10::Device d = device.device();
  if (device.layout() == c10::kSparse) {
    const auto* from = at::sparse::get_sparse_impl(cpu);
    auto* to = at::sparse::get_sparse_impl(device);
    to->raw_resize_(from->sparse_dim(), from->dense_dim(), cpu.sizes());
    to->set_indices_and_values_unsafe(member_back(from->indices(), d),
                                      member_back(from->values(), d));
    to->set_coalesced(from->coalesced());
  } else if (is_compressed(device)) {
    const auto* from = at::sparse_csr::get_sparse_csr_impl(cpu);
    at::sparse_csr::get_sparse_csr_impl(device)->set_member_tensors(
        member_back(from->compressed_indices(), d), member_back(from->plain_indices(), d),
        member_back(from->values(), d), cpu.sizes());
  } else if (device.is_quantized()) {
    // Bytes were written through the view; a kernel may have given it new quantization.
    const at::QuantizerPtr q = at::get_qtensorimpl(cpu)->quantizer();
    auto made = view_quantizers_.find(cpu.unsafeGetTensorImpl());
    if (made == view_quantizers_.end() || made->second.get() != q.get()) {
      at::set_quantizer_(device,
                         quantizer_with(q, [&](const at::Tensor& m) { return member_back(m, d); }));
    }
  } else {
    aliases_.carry_back(device, cpu, resize_storage_for_host_write);
  }
}

void LayoutViews::own_quantizer(const at::Tensor& cpu) {
  const at::QuantizerPtr q = at::get_qtensorimpl(cpu)->quantizer();
  if (q->qscheme() == at::kPerTensorAffine) return;
  bool viewed = false;
  const at::QuantizerPtr owned = quantizer_with(q, [&](const at::Tensor& m) {
    if (members_.count(m.unsafeGetTensorImpl()) == 0 && m.device().is_cpu()) return m;
    viewed = true;
    return m.to(c10::kCPU, /*non_blocking=*/false, /*copy=*/true);
  });
  if (viewed) at::set_quantizer_(cpu, owned);
}

at::Tensor LayoutViews::to_device(const at::Tensor& cpu, c10::Device device) {
  if (!cpu.defined() || !cpu.device().is_cpu()) return cpu;
  if (cpu.layout() == c10::kSparse) {
    const auto* impl = at::sparse::get_sparse_impl(cpu);
    return at::_sparse_coo_tensor_with_dims_and_tensors(
        impl->sparse_dim(), impl->dense_dim(), cpu.sizes(), member_back(impl->indices(), device),
        member_back(impl->values(), device), cpu.options().device(device), impl->coalesced());
  }
  if (is_compressed(cpu)) {
    const auto* impl = at::sparse_csr::get_sparse_csr_impl(cpu);
    return at::_sparse_compressed_tensor_unsafe(
        member_back(impl->compressed_indices(), device), member_back(impl->plain_indices(), device),
        member_back(impl->values(), device), cpu.sizes(), cpu.scalar_type(), cpu.layout(), device,
        std::nullopt);
  }
  if (cpu.is_quantized()) {
    const at::MemoryFormat format = cpu.suggest_memory_format();
    const at::Tensor c = cpu.contiguous(format);
    const at::QuantizerPtr q =
        quantizer_with(at::get_qtensorimpl(c)->quantizer(),
                       [&](const at::Tensor& m) { return member_back(m, device); });
    at::Tensor d = at::new_qtensor(c.sizes(), c.options().device(device).memory_format(format), q);
    // A copy on the stream, not a memcpy: ordered after what the allocator queued on the block
    // (the sanitizer's poison) and seen by the sanitizer as the bytes' first write.
    dense_members(d)[0].copy_(dense_members(c)[0]);
    return d;
  }
  return member_back(cpu, device);
}

}  // namespace vdev::backend
