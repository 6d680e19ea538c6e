#include "backend/common/operator_uses.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

// In-place operators whose written first argument is overwritten, not read (wholly, or in the
// places they write: a partial write counts as initialising, a missed uninitialised read rather
// than a false one).
bool overwrites_self(const std::string& name) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::fill_",       "aten::zero_",          "aten::normal_",        "aten::uniform_",
      "aten::random_",     "aten::exponential_",   "aten::geometric_",     "aten::log_normal_",
      "aten::cauchy_",     "aten::bernoulli_",     "aten::index_put_",     "aten::_index_put_impl_",
      "aten::index_fill_", "aten::index_copy_",    "aten::masked_fill_",   "aten::masked_scatter_",
      "aten::put_",        "aten::fill_diagonal_", "aten::_foreach_zero_", "aten::_foreach_copy_",
      "aten::set_",        "aten::copy_",          "aten::_foreach_fill_"};
  return kNames.count(name) != 0;
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

// The value of the call's argument `name`, if the schema has it.
const c10::IValue* argument_named(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                  std::size_t first, const char* name) {
  const std::optional<int> i = op.schema().argumentIndexWithName(name);
  return i ? &stack[first + *i] : nullptr;
}

// The BLAS-style products (self * beta + product): with beta == 0 self is not read ("If beta is
// 0, then input will be ignored, and nan and inf in it will not be propagated", the documentation
// of each; CPU's and CUDA's kernels zero or overwrite the result instead of scaling it). ATen's
// own mv and matmul of a batch by a vector call addmv_ on a fresh torch.empty with beta=0.
bool ignores_self(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                  std::size_t first) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::addmm", "aten::addmm_", "aten::addmv",   "aten::addmv_",  "aten::addr",
      "aten::addr_", "aten::addbmm", "aten::addbmm_", "aten::baddbmm", "aten::baddbmm_"};
  if (kNames.count(op.schema().name()) == 0) return false;
  const c10::IValue* beta = argument_named(op, stack, first, "beta");
  if (beta == nullptr || !beta->isScalar()) return false;
  const c10::Scalar b = beta->toScalar();
  return b.isComplex() ? b.toComplexDouble() == c10::complex<double>(0, 0) : b.toDouble() == 0;
}

// Written positional arguments that the operator only writes (every element), by name; the
// condition, when there is one, is a bool argument that must be true.
struct WriteOnly {
  std::vector<std::string_view> arguments;
  const char* when = nullptr;
};
// - _cummax_helper / _cummin_helper: CPU's cummax and cummin (and their out= forms) write their
//   values and indices through these helpers (aten/src/ATen/native/ReduceOps.cpp);
// - rrelu_with_noise: in training every element of noise is drawn (1 where the input is
//   positive); out of training noise is not touched (RReLU's kernels in Activation.cpp);
// - _fused_sgd_: its first step sets the momentum buffers to the gradients
//   (FusedSGDKernel.cpp, `is_first_step`), as SGD's momentum_buffer_list starts as empty_like.
//   With a found_inf of 1 (GradScaler's skipped step) the kernel writes nothing, and the next step
//   reads the buffers unwritten; found_inf's value is on the device when the step is queued, so
//   the buffers count as written whatever it holds: a missed report, never a false one on every
//   GradScaler-driven first step.
bool is_write_only(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                   const c10::Argument& arg) {
  static const std::unordered_map<std::string_view, WriteOnly> kTable = {
      {"aten::_cummax_helper", {{"values", "indices"}}},
      {"aten::_cummin_helper", {{"values", "indices"}}},
      {"aten::rrelu_with_noise", {{"noise"}, "training"}},
      {"aten::rrelu_with_noise_", {{"noise"}, "training"}},
      {"aten::_fused_sgd_", {{"momentum_buffer_list"}, "is_first_step"}},
  };
  auto it = kTable.find(op.schema().name());
  if (it == kTable.end()) return false;
  const auto& names = it->second.arguments;
  if (std::find(names.begin(), names.end(), arg.name()) == names.end()) return false;
  if (it->second.when == nullptr) return true;
  const c10::IValue* when = argument_named(op, stack, first, it->second.when);
  return when != nullptr && when->isBool() && when->toBool();
}

// rrelu_with_noise out of training does not touch noise at all.
bool untouched(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
               const c10::Argument& arg) {
  const std::string& name = op.schema().name();
  if ((name != "aten::rrelu_with_noise" && name != "aten::rrelu_with_noise_") ||
      arg.name() != "noise") {
    return false;
  }
  const c10::IValue* training = argument_named(op, stack, first, "training");
  return training != nullptr && training->isBool() && !training->toBool();
}

}  // namespace

std::optional<Access> argument_access(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                      std::size_t first, std::size_t i) {
  const c10::Argument& arg = op.schema().arguments()[i];
  const bool self = i == 0;
  if (self && ignores_self(op, stack, first)) {
    // Not read; an in-place form still writes every element.
    if (is_written(arg)) return Access::kWrite;
    return std::nullopt;
  }
  if (untouched(op, stack, first, arg)) return std::nullopt;
  if (!is_written(arg)) return Access::kRead;
  if (arg.kwarg_only() || is_write_only(op, stack, first, arg)) return Access::kWrite;
  const std::string& name = op.schema().name();
  if (self && (overwrites_self(name) || reduces_without_self(op, stack, first))) {
    return Access::kWrite;
  }
  return Access::kReadWrite;
}

void operator_uses(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                   c10::ArrayRef<const c10::IValue*> fresh, HeldUses& out) {
  const std::size_t nargs = op.schema().arguments().size();
  for (std::size_t i = 0; i < nargs; ++i) {
    const std::optional<Access> access = argument_access(op, stack, first, i);
    if (!access) continue;
    for_each_tensor(stack[first + i], [&](const at::Tensor& t) {
      if (t.defined()) out.add(t, *access);
    });
  }
  for (const c10::IValue* v : fresh) {
    for_each_tensor(*v, [&](const at::Tensor& t) {
      if (t.defined()) out.add(t, Access::kWrite);
    });
  }
}

}  // namespace vdev::backend
