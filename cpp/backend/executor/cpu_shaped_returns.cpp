#include "backend/executor/cpu_shaped_returns.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/full.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

bool is_batch_norm(const std::string& name) {
  static const std::unordered_set<std::string> ops = {
      "aten::native_batch_norm",
      "aten::_native_batch_norm_legit",
      "aten::_native_batch_norm_legit_no_training",
      "aten::_batch_norm_with_update",
      "aten::_batch_norm_no_update",
  };
  return ops.count(name) != 0;
}

bool is_embedding_bag(const std::string& name) {
  return name == "aten::_embedding_bag" || name == "aten::_embedding_bag_forward_only";
}

at::Tensor filled_like(const at::Tensor& t, std::vector<int64_t> sizes, double value) {
  return at::full(sizes, value, at::TensorOptions().dtype(t.scalar_type()));
}

// `t`'s strides with the given sizes (as many dims), filled with `value`: CPU's embedding bag picks
// its fast path, which sizes offset2bag differently, by the weight's and per-sample weights'
// strides.
at::Tensor filled_strided_like(const at::Tensor& t, std::vector<int64_t> sizes, double value) {
  return at::empty_strided(sizes, t.strides(), at::TensorOptions().dtype(t.scalar_type()))
      .fill_(value);
}

// Batch norm: input [2, C, 1, ...] of the input's dtype; every other tensor argument (weight,
// bias, running statistics: all [C]) ones of its own dtype; other arguments as given.
std::optional<torch::jit::Stack> batch_norm_probe(const torch::jit::Stack& stack, std::size_t first,
                                                  std::size_t nargs) {
  const c10::IValue& input_value = stack[first];
  if (!input_value.isTensor() || input_value.toTensor().dim() < 2) return std::nullopt;
  const at::Tensor& input = input_value.toTensor();
  std::vector<int64_t> sizes(static_cast<std::size_t>(input.dim()), 1);
  sizes[0] = 2;
  sizes[1] = input.size(1);
  torch::jit::Stack probe;
  probe.reserve(nargs);
  probe.emplace_back(filled_like(input, sizes, 0));
  for (std::size_t i = first + 1; i < first + nargs; ++i) {
    probe.push_back(map_tensors(stack[i], [](const at::Tensor& t) {
      return t.defined() ? filled_like(t, t.sizes().vec(), 1) : t;
    }));
  }
  return probe;
}

// Embedding bag: the weight cut to the rows a valid padding_idx needs, indices and offsets of
// their sizes all zero (valid, and the returns' sizes depend only on sizes, strides and mode),
// per-sample weights ones; every tensor with the strides of the call's own.
std::optional<torch::jit::Stack> embedding_bag_probe(const torch::jit::Stack& stack,
                                                     std::size_t first, std::size_t nargs) {
  const c10::IValue& weight = stack[first];
  const c10::IValue& padding = stack[first + nargs - 1];
  if (!weight.isTensor() || weight.toTensor().dim() != 2 || !padding.isInt()) return std::nullopt;
  const at::Tensor& w = weight.toTensor();
  const int64_t rows = std::min<int64_t>(w.size(0), std::max<int64_t>(1, padding.toInt() + 1));
  torch::jit::Stack probe;
  probe.reserve(nargs);
  probe.emplace_back(filled_strided_like(w, {rows, w.size(1)}, 1));
  for (std::size_t i = first + 1; i < first + nargs; ++i) {
    const double value = i == first + 6 ? 1.0 : 0.0;  // per_sample_weights; indices, offsets 0
    probe.push_back(map_tensors(stack[i], [value](const at::Tensor& t) {
      return t.defined() ? filled_strided_like(t, t.sizes().vec(), value) : t;
    }));
  }
  return probe;
}

}  // namespace

bool returns_shaped_by_cpu(const c10::FunctionSchema& schema) {
  return is_batch_norm(schema.name()) || is_embedding_bag(schema.name());
}

bool shape_returns_as_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          std::size_t first, std::size_t nargs, std::vector<MetaReturn>& returns) {
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  const at::DisableRecordFunctionGuard unprofiled;  // vdev's own probe: not shown by the profiler
  const bool batch_norm = is_batch_norm(op.schema().name());
  std::optional<torch::jit::Stack> probe =
      batch_norm ? batch_norm_probe(stack, first, nargs) : embedding_bag_probe(stack, first, nargs);
  if (!probe) return false;
  // out= tensors empty (native_batch_norm.out): CPU's kernel sizes them for the probe's input
  // silently, where tensors of the call's sizes would make it warn that it resized them.
  const auto& args = op.schema().arguments();
  for (std::size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*probe)[i];
    if (is_written(args[i]) && args[i].kwarg_only() && v.isTensor() && v.toTensor().defined()) {
      v = at::empty({0}, at::TensorOptions().dtype(v.toTensor().scalar_type()));
    }
  }
  try {
    op.callBoxed(&*probe);
  } catch (const std::exception&) {
    return false;  // CPU rejects the probe: the call runs synchronously and raises CPU's error
  }
  if (probe->size() != returns.size()) return false;
  for (std::size_t r = 0; r < probe->size(); ++r) {
    if (!(*probe)[r].isTensor()) return false;
    const at::Tensor& t = (*probe)[r].toTensor();
    MetaReturn& ret = returns[r];
    ret.kind = MetaReturn::Tensor;
    ret.tensors.assign(1, describe(t));
    if (batch_norm && r == 0) {  // the output: the input's sizes, in the format CPU gives it
      const at::Tensor& input = stack[first].toTensor();
      const at::Tensor like =
          at::empty(input.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(c10::kMeta),
                    input.suggest_memory_format());
      ret.tensors[0] = describe(like);
    }
  }
  return true;
}

}  // namespace vdev::backend
