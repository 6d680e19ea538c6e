#include "backend/compile/launch_arguments.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

std::string device_name(int index) { return "vdev:" + std::to_string(index); }

}  // namespace

KernelSignature::KernelSignature(std::uintptr_t entry, std::string kinds, const std::string& name)
    : entry_(reinterpret_cast<KernelEntry>(entry)),
      kinds_(std::move(kinds)),
      name_(kernel_task_name(name)) {
  if (entry == 0) rt::fail<std::invalid_argument>("_CompiledKernel", "null entry for ", name);
  for (char k : kinds_) {
    if (k != 'p' && k != 'P' && k != 'i' && k != 'f') {
      rt::fail<std::invalid_argument>("_CompiledKernel", "bad argument kind '", std::string(1, k),
                                      "' for ", name, " (p, P, i or f)");
    }
  }
}

LaunchArguments::LaunchArguments(const KernelSignature& kernel, std::size_t given)
    : kernel_(kernel), slots_(kernel.kinds().size()) {
  if (given != kernel.kinds().size()) {
    throw rt::TypeMismatch(std::string(kernel.name()) + "() takes " +
                           std::to_string(kernel.kinds().size()) + " arguments (" +
                           std::to_string(given) + " given)");
  }
}

LaunchArguments::Buffer LaunchArguments::add_buffer(std::size_t i, void* data) {
  if (data == nullptr) {
    slots_[i].pointer = nullptr;
    return Buffer::kNoBytes;
  }
  const int own = rt::pointer_device(data);
  if (own < 0) {
    slots_[i].pointer = nullptr;  // filled on the worker with the host scalar's copy
    return Buffer::kHost;
  }
  if (device_ >= 0 && own != device_) {
    throw std::runtime_error(
        "Expected all tensors to be on the same device, but found at least two devices, " +
        device_name(device_) + " and " + device_name(own) + "! (compiled kernel " + kernel_.name() +
        ")");
  }
  device_ = own;
  slots_[i].pointer = rt::kernel_address(data);
  return Buffer::kDevice;
}

void LaunchArguments::add_host_scalar(std::size_t i, const void* data, std::int64_t numel,
                                      std::size_t element_size) {
  if (numel != 1 || element_size > sizeof(HostScalar::bytes)) {
    rt::fail<std::invalid_argument>(
        kernel_.name(), "argument ", i, " is a CPU tensor of ", numel,
        " elements; a compiled vdev kernel reads vdev tensors and one-element CPU tensors only");
  }
  HostScalar& s = scalars_.emplace_back();
  s.slot = static_cast<std::uint32_t>(i);
  std::memcpy(s.bytes, data, element_size);
}

void LaunchArguments::launch(c10::ArrayRef<TensorUse> uses) && {
  const int device = device_ >= 0 ? device_ : rt::get_device();
  launch_kernel(kernel_.entry(), kernel_.name(), static_cast<c10::DeviceIndex>(device),
                std::move(slots_), std::move(scalars_), uses);
}

}  // namespace vdev::backend
