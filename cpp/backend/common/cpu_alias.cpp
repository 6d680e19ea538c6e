#include "backend/common/cpu_alias.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>

#include "backend/common/vdev_device.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

// A non-owning CPU tensor over `data` with t's sizes, strides and lazy conj/neg bits.
at::Tensor host_view_of(void* data, const at::Tensor& t) {
  at::Tensor alias = at::from_blob(data, t.sizes(), t.strides(), t.options().device(c10::kCPU));
  // Lazy conjugation and negation are metadata: the alias must read the same values.
  if (t.is_conj()) alias._set_conj(true);
  if (t.is_neg()) alias._set_neg(true);
  return alias;
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == kVdev, "cpu_alias expects a vdev tensor, got one on ",
              t.device());
  // data_ptr() is pointer arithmetic on the device address (storage base + offset): it does not
  // touch device memory. kernel_address() translates the interior address as a whole.
  return host_view_of(vdev::rt::kernel_address(t.data_ptr()), t);
}

AliasSpec AliasSpec::of(const at::TensorBase& t) {
  AliasSpec s;
  s.set(t);
  return s;
}

void AliasSpec::set(const at::TensorBase& t) {
  TORCH_CHECK(t.device().type() == kVdev, "AliasSpec expects a vdev tensor, got one on ",
              t.device());
  data = vdev::rt::kernel_address(t.data_ptr());
  sizes.assign(t.sizes().begin(), t.sizes().end());
  strides.assign(t.strides().begin(), t.strides().end());
  dtype = t.scalar_type();
  conj = t.is_conj();
  neg = t.is_neg();
}

at::Tensor AliasSpec::make_at(void* address) const {
  // What from_blob makes (a non-owning, non-resizable CPU storage over `address`), built directly:
  // a stream worker makes one per tensor of every queued operator, and from_blob's TensorMaker
  // costs twice as much.
  const caffe2::TypeMeta meta = c10::scalarTypeToTypeMeta(dtype);
  const std::size_t nbytes = at::detail::computeStorageNbytes(sizes, strides, meta.itemsize());
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes,
                       at::DataPtr(address, c10::Device(c10::kCPU)), /*allocator=*/nullptr,
                       /*resizable=*/false);
  at::Tensor alias =
      at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKey::CPU, meta);
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  if (conj) alias._set_conj(true);
  if (neg) alias._set_neg(true);
  return alias;
}

void place_aliases(c10::ArrayRef<std::pair<std::size_t, AliasSpec>> specs,
                   torch::jit::Stack& stack) {
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const auto& [i, spec] = specs[k];
    std::size_t same = k;
    for (std::size_t e = 0; e < k && same == k; ++e) {
      if (specs[e].second.same_view(spec)) same = e;
    }
    stack[i] = same == k ? c10::IValue(spec.make()) : stack[specs[same].first];
  }
}

at::Tensor SharedCpuAliases::of(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kVdev) return t;
  // One alias per tensor, as on CPU: cat((x, y), out=x) must see its out resized into its input.
  auto [known, fresh] = tensors_.try_emplace(t.unsafeGetTensorImpl());
  if (!fresh) return known->second;
  const c10::Storage& device_storage = t.storage();
  auto [it, inserted] = shared_.try_emplace(device_storage.unsafeGetStorageImpl());
  if (inserted) {
    void* base = device_storage.data() == nullptr ? nullptr
                                                  : vdev::rt::kernel_address(device_storage.data());
    it->second.base = base;
    it->second.cpu = c10::Storage(c10::Storage::use_byte_size_t(), device_storage.nbytes(),
                                  at::DataPtr(base, c10::Device(c10::kCPU)), c10::GetCPUAllocator(),
                                  device_storage.resizable());
  }
  at::Tensor a = at::empty({0}, t.options().device(c10::kCPU));
  a.set_(it->second.cpu, t.storage_offset(), t.sizes(), t.strides());
  if (t.is_conj()) a._set_conj(true);
  if (t.is_neg()) a._set_neg(true);
  known->second = a;
  return a;
}

void SharedCpuAliases::copy_grown_bytes(const c10::Storage& device, Shared& sh) {
  if (sh.cpu.nbytes() > 0) {
    std::memcpy(vdev::rt::kernel_address(device.data()), sh.cpu.data(), sh.cpu.nbytes());
  }
  sh.base = const_cast<void*>(sh.cpu.data());  // copied once, whichever view grew it
}

void SharedCpuAliases::carry_metadata(const at::Tensor& device, const at::Tensor& cpu) {
  if (cpu.sizes() != device.sizes() || cpu.strides() != device.strides() ||
      cpu.storage_offset() != device.storage_offset()) {
    device.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(),
                                                        cpu.storage_offset());
  }
}

at::Tensor host_view(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "host_view expects a CPU tensor, got one on ", t.device());
  return host_view_of(t.data_ptr(), t);
}

}  // namespace vdev::backend
