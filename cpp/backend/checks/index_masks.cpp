#include "backend/checks/index_masks.h"

#include <ATen/native/IndexingUtils.h>

#include <string_view>

#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

// The operators whose `indices` argument is advanced indexing's (ATen expands masks in each).
bool is_advanced_indexing(const c10::FunctionSchema& schema) {
  const std::string_view name = schema.name();
  return name == "aten::index" || name == "aten::_unsafe_index" || name == "aten::index_put" ||
         name == "aten::index_put_" || name == "aten::_index_put_impl" ||
         name == "aten::_index_put_impl_" || name == "aten::_unsafe_index_put";
}

bool is_mask(const std::optional<at::Tensor>& i) {
  return i.has_value() && i->defined() &&
         (i->scalar_type() == at::kBool || i->scalar_type() == at::kByte);
}

// ATen's index_put_ calls masked_fill_ instead of indexing for these (canDispatchToMaskedFill in
// TensorAdvancedIndexing.cpp): one mask on self's device, a one-element CPU value, no accumulate.
// A one-element value on self's device counts as a CPU one here: `x[mask] = 1.0` makes its value
// on the CPU for CUDA tensors but on the device for others (THPVariable_setitem), so vdev's
// equivalent of CUDA's call has a device value; CPU's kernel on the worker then takes the
// masked_fill_ path (every argument is a CPU alias there) and nothing synchronizes, as on CUDA.
bool becomes_masked_fill(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                         std::size_t first, const c10::List<std::optional<at::Tensor>>& indices) {
  const auto value_at = schema.argumentIndexWithName("values");
  const auto accumulate_at = schema.argumentIndexWithName("accumulate");
  if (!value_at || !accumulate_at) return false;  // index, _unsafe_index
  const c10::IValue& value = stack[first + *value_at];
  if (!value.isTensor() || stack[first + *accumulate_at].toBool()) return false;
  const at::Tensor& v = value.toTensor();
  const c10::Device self_device = stack[first].toTensor().device();
  if (v.numel() != 1 || !(v.device().is_cpu() || v.device() == self_device)) return false;
  int masks = 0;
  for (const std::optional<at::Tensor>& i : indices) {
    if (!i.has_value() || !i->defined()) continue;
    if (!is_mask(i) || i->device() != self_device) return false;
    ++masks;
  }
  return masks == 1;
}

}  // namespace

void expand_index_masks(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  if (!is_advanced_indexing(schema)) return;
  const auto indices_at = schema.argumentIndexWithName("indices");
  if (!indices_at) return;
  const std::size_t first = stack.size() - schema.arguments().size();
  c10::IValue& arg = stack[first + *indices_at];
  if (!arg.isOptionalTensorList() || !stack[first].isTensor()) return;
  const c10::List<std::optional<at::Tensor>> indices = arg.toOptionalTensorList();
  bool any_mask = false;
  for (const std::optional<at::Tensor>& i : indices) any_mask = any_mask || is_mask(i);
  if (!any_mask || becomes_masked_fill(schema, stack, first, indices)) return;
  const at::Tensor& self = stack[first].toTensor();
  // More indices than dimensions is index's own error ("too many indices for tensor of dimension
  // ..."), raised by its kernel; expandTensors would index out of self's sizes first.
  std::size_t dims = 0;
  for (const std::optional<at::Tensor>& i : indices) dims += is_mask(i) ? i->dim() : 1;
  if (dims > static_cast<std::size_t>(self.dim())) return;
  c10::List<std::optional<at::Tensor>> expanded;
  for (at::Tensor& t : at::native::expandTensors(self, indices)) {
    expanded.push_back(t.defined() ? std::optional<at::Tensor>(std::move(t)) : std::nullopt);
  }
  arg = c10::IValue(std::move(expanded));
}

}  // namespace vdev::backend
