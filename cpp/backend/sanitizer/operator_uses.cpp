#include "backend/sanitizer/operator_uses.h"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

// In-place operators whose written first argument is overwritten, not read (wholly, or in the
// places they write: a partial write counts as initialising, a missed uninitialised read rather
// than a false one).
bool overwrites_self(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::fill_",       "aten::zero_",          "aten::normal_",        "aten::uniform_",
      "aten::random_",     "aten::exponential_",   "aten::geometric_",     "aten::log_normal_",
      "aten::cauchy_",     "aten::bernoulli_",     "aten::index_put_",     "aten::_index_put_impl_",
      "aten::index_fill_", "aten::index_copy_",    "aten::masked_fill_",   "aten::masked_scatter_",
      "aten::put_",        "aten::fill_diagonal_", "aten::_foreach_zero_", "aten::_foreach_copy_",
      "aten::set_",        "aten::copy_",          "aten::_foreach_fill_"};
  return kNames.count(op.schema().name()) != 0;
}

// scatter_reduce_ and index_reduce_ with include_self=False replace, not read, self's values in
// the places they write (PyTorch's own masked reductions of sparse compressed tensors write a
// fresh empty tensor that way).
bool reduces_without_self(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          std::size_t first) {
  const std::string& name = op.schema().name();
  if (name != "aten::scatter_reduce_" && name != "aten::index_reduce_") return false;
  const std::optional<int> i = op.schema().argumentIndexWithName("include_self");
  return i && stack[first + *i].isBool() && !stack[first + *i].toBool();
}

Access access_of(const c10::Argument& arg, bool overwrite, bool first_argument) {
  if (!is_written(arg)) return Access::kRead;
  return (arg.kwarg_only() || (overwrite && first_argument)) ? Access::kWrite : Access::kReadWrite;
}

}  // namespace

Access argument_access(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                       std::size_t first, std::size_t i) {
  const bool overwrite = overwrites_self(op) || reduces_without_self(op, stack, first);
  return access_of(op.schema().arguments()[i], overwrite, i == 0);
}

std::vector<TensorUse> operator_uses(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                     std::size_t first,
                                     const std::vector<const c10::IValue*>& fresh) {
  std::vector<TensorUse> uses;
  const auto& args = op.schema().arguments();
  const bool overwrite = overwrites_self(op) || reduces_without_self(op, stack, first);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Access access = access_of(args[i], overwrite, i == 0);
    for_each_tensor(stack[first + i], [&](const at::Tensor& t) {
      if (t.defined()) uses.push_back({t, access});
    });
  }
  for (const c10::IValue* v : fresh) {
    for_each_tensor(*v, [&](const at::Tensor& t) {
      if (t.defined()) uses.push_back({t, Access::kWrite});
    });
  }
  return uses;
}

}  // namespace vdev::backend
