// Nested tensors (torch.nested, strided layout) on vdev: kernels for NestedTensorPrivateUse1.
// (The jagged layout is a Python tensor subclass over dense tensors and needs nothing here.)
//
// ATen registers its nested kernels for NestedTensorCPU and NestedTensorCUDA only, while
// PyTorch's own modules send PrivateUse1 tensors down their nested fast paths (TransformerEncoder
// in evaluation with a padding mask: torch/nn/modules/transformer.py lists the PrivateUse1
// backend among its supported devices). vdev runs every nested operator synchronously on CPU
// copies, as at::native::cpu_fallback does for dense ones: it waits for the current stream, copies
// the nested arguments' buffers to the host (sizes, strides and offsets are host tensors
// already), calls CPU's nested kernel, and copies nested and dense results back to the device.
// In-place and out= arguments are written back. View operators cannot run on copies: those ATen
// implements for nested tensors (unbind, select, narrow, view, transpose, ...) are device-generic
// metadata kernels, the same for CPU and CUDA, so vdev registers them as they are; any other
// nested view raises NotImplementedError naming it instead of returning a copy. Nested operators
// therefore synchronize where CUDA queues them; the sync debug mode names each one.
//
// Thread rules: runs on the dispatching thread; the stream workers only see the dense copies.
#include <ATen/NestedTensorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/chunk_native.h>
#include <ATen/ops/detach_native.h>
#include <ATen/ops/narrow_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/split_with_sizes_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/transpose_native.h>
#include <ATen/ops/unbind_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "backend/checks/device_rules.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/tensor_args.h"
#include "backend/common/vdev_device.h"

namespace vdev::backend {
namespace {

// The same nested tensor (sizes, strides, offsets) over another buffer.
at::Tensor nested_over(const at::Tensor& nested, at::Tensor buffer) {
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(nested);
  return at::detail::make_tensor<at::native::NestedTensorImpl>(
      std::move(buffer), impl->get_nested_sizes().clone(), impl->get_nested_strides().clone(),
      impl->get_storage_offsets().clone());
}

at::Tensor nested_storage(const at::Tensor& nested) {
  return at::native::get_nested_tensor_impl(nested)->get_unsafe_storage_as_tensor();
}

at::Tensor to_host(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kVdev) return t;
  return t.is_nested() ? nested_over(t, nested_storage(t).cpu()) : t.cpu();
}

at::Tensor to_device(const at::Tensor& t, c10::Device device) {
  if (!t.defined() || t.device().type() != c10::kCPU) return t;
  return t.is_nested() ? nested_over(t, nested_storage(t).to(device)) : t.to(device);
}

// Writes a host result back into the device tensor it was copied from.
void write_back(const at::Tensor& device_tensor, const at::Tensor& host) {
  if (device_tensor.is_nested()) {
    nested_storage(device_tensor).copy_(nested_storage(host));
  } else {
    at::Tensor(device_tensor).copy_(host);
  }
}

bool is_view(const c10::FunctionSchema& schema) {
  for (const c10::Argument& r : schema.returns()) {
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) return true;
  }
  return false;
}

// aten::_to_copy dispatches on its target device too, so a nested CPU tensor's .to("vdev") arrives
// here as well as a nested vdev tensor's .cpu(): the buffer is converted and the nested metadata
// (host tensors) kept, as ATen's _to_copy_nested does.
at::Tensor nested_to_copy(const torch::jit::Stack& args) {
  const at::Tensor& self = args[0].toTensor();
  const auto dtype = args[1].toOptional<c10::ScalarType>();
  const auto layout = args[2].toOptional<c10::Layout>();
  const auto device = args[3].toOptional<c10::Device>();
  const bool non_blocking = args[5].toBool();
  TORCH_CHECK(!layout || *layout == self.layout(),
              "to(options) doesn't support converting to a different layout, but got "
              "self.layout being ",
              self.layout(), " and options.layout set as ", *layout);
  const at::Tensor storage = nested_storage(self);
  return nested_over(self, storage.to(device.value_or(self.device()),
                                      dtype.value_or(self.scalar_type()), non_blocking,
                                      /*copy=*/true));
}

void nested_vdev_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  if (schema.name() == "aten::_to_copy") {
    const torch::jit::Stack args(stack->end() - 7, stack->end());
    at::Tensor result = nested_to_copy(args);
    torch::jit::drop(*stack, 7);
    stack->emplace_back(std::move(result));
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!is_view(schema), "The view operator '", schema.operator_name(),
                              "' is not supported for nested tensors on vdev (nested operators "
                              "run on host copies, which cannot alias device memory)");
  const std::optional<c10::Device> device = check_operator_devices(op, *stack);
  TORCH_INTERNAL_ASSERT(device.has_value(), "a NestedTensorPrivateUse1 call without vdev tensors");
  const c10::DeviceGuard guard(*device);
  note_synchronizing_operation(schema.name().c_str(), device->index());
  sync_current_stream(*device);
  const QuietSynchronizations quiet;  // the copies below are part of this operator

  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;
  torch::jit::Stack host_stack;
  host_stack.reserve(nargs);
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (device argument, its host copy)
  for (std::size_t i = first; i < stack->size(); ++i) {
    host_stack.push_back(map_tensors((*stack)[i], to_host));
    const c10::IValue& original = (*stack)[i];
    if (is_written(schema.arguments()[i - first]) && original.isTensor() &&
        is_vdev_tensor(original.toTensor())) {
      written.emplace_back(original.toTensor(), host_stack.back().toTensor());
    }
  }
  op.callBoxed(&host_stack);  // the host arguments dispatch to CPU's (nested) kernels
  for (const auto& [device_tensor, host] : written) write_back(device_tensor, host);

  std::vector<c10::IValue> results;
  results.reserve(schema.returns().size());
  for (std::size_t r = 0; r < schema.returns().size(); ++r) {
    if (std::optional<std::size_t> arg = written_argument(schema, schema.returns()[r])) {
      results.push_back((*stack)[first + *arg]);  // the written device argument itself
      continue;
    }
    results.push_back(
        map_tensors(host_stack[r], [&](const at::Tensor& t) { return to_device(t, *device); }));
  }
  torch::jit::drop(*stack, nargs);
  for (c10::IValue& v : results) stack->push_back(std::move(v));
}

}  // namespace

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_vdev_kernel>());
}

// The fallback alone is not enough: for an operator with a CompositeImplicitAutograd kernel
// (linear, scaled_dot_product_attention, ...) that kernel would take NestedTensorPrivateUse1 and
// run the dense decomposition, which cannot handle nested tensors. Every operator ATen gives a
// NestedTensorCPU kernel is registered explicitly, as it is for CPU (libtorch_cpu is loaded, with
// its registrations, before this library).
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::NestedTensorCPU)) continue;
    // Views get ATen's own kernels below; the others are not views.
    if (name.name.rfind("aten::", 0) != 0 || is_view(handle->schema())) continue;
    const std::string base = name.name.substr(name.name.find("::") + 2);
    const std::string qualified =
        name.overload_name.empty() ? base : base + "." + name.overload_name;
    m.impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&nested_vdev_kernel>());
  }
}

// ATen's nested view kernels (native_functions.yaml: the same kernel for NestedTensorCPU and
// NestedTensorCUDA), with the dispatcher's signatures.
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  using at::Tensor;
  m.impl("alias", [](const Tensor& self) { return at::native::alias_nested(self); });
  m.impl("detach", [](const Tensor& self) { return at::native::detach(self); });
  m.impl("values", [](const Tensor& self) { return at::native::values_nested(self); });
  m.impl("chunk", [](const Tensor& self, int64_t chunks, int64_t dim) {
    return at::native::chunk_nested_tensor(self, chunks, dim);
  });
  m.impl("narrow", [](const Tensor& self, int64_t dim, c10::SymInt start, c10::SymInt length) {
    return at::native::narrow_nested_symint(self, dim, std::move(start), std::move(length));
  });
  m.impl("select.int", [](const Tensor& self, int64_t dim, c10::SymInt index) {
    return at::native::select_nested(self, dim, index.guard_int(__FILE__, __LINE__));
  });
  m.impl("split_with_sizes", [](const Tensor& self, c10::SymIntArrayRef sizes, int64_t dim) {
    return at::native::split_with_sizes_nested(self, C10_AS_INTARRAYREF_SLOW(sizes), dim);
  });
  m.impl("squeeze", [](const Tensor& self) { return at::native::squeeze_nested(self); });
  m.impl("squeeze.dim",
         [](const Tensor& self, int64_t dim) { return at::native::squeeze_dim_nested(self, dim); });
  m.impl("squeeze.dims", [](const Tensor& self, at::IntArrayRef dims) {
    return at::native::squeeze_dim_nested(self, dims);
  });
  m.impl("transpose.int", [](const Tensor& self, int64_t dim0, int64_t dim1) {
    return at::native::transpose_nested(self, dim0, dim1);
  });
  m.impl("unsqueeze",
         [](const Tensor& self, int64_t dim) { return at::native::unsqueeze_nested(self, dim); });
  m.impl("unbind.int", [](const Tensor& self, int64_t dim) {
    return at::native::NestedTensor_unbind(self, dim);
  });
  m.impl("view", [](const Tensor& self, c10::SymIntArrayRef size) {
    return at::native::view_nested(self, C10_AS_INTARRAYREF_SLOW(size));
  });
}

}  // namespace vdev::backend
