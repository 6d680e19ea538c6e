#include "backend/checks/conv_stand_ins.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "backend/common/stand_in_trials.h"

namespace vdev::backend {

bool is_convolution(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  return schema.name() == "aten::convolution" && schema.overload_name().empty();
}

bool cpu_accepts_conv_stand_ins(const torch::jit::Stack& stack, std::size_t first) {
  const at::Tensor& input = stack[first].toTensor();
  const at::Tensor& weight = stack[first + 1].toTensor();
  const std::optional<at::Tensor> bias = stack[first + 2].toOptional<at::Tensor>();
  const std::vector<int64_t> stride = stack[first + 3].toIntVector();
  const std::vector<int64_t> padding = stack[first + 4].toIntVector();
  const std::vector<int64_t> dilation = stack[first + 5].toIntVector();
  const bool transposed = stack[first + 6].toBool();
  const std::vector<int64_t> output_padding = stack[first + 7].toIntVector();
  const int64_t groups = stack[first + 8].toInt();
  if (weight.dim() < 3 || padding.empty() || dilation.empty() || groups < 1) return false;
  const std::size_t spatial = static_cast<std::size_t>(weight.dim()) - 2;
  std::vector<int64_t> in_sizes{1, groups}, w_sizes{groups, 1};
  for (std::size_t i = 0; i < spatial; ++i) {
    const int64_t k = weight.size(static_cast<int64_t>(i) + 2);
    const int64_t d = i < dilation.size() ? dilation[i] : dilation.back();
    const int64_t pad = i < padding.size() ? padding[i] : padding.back();
    in_sizes.push_back(transposed ? 1 : std::max<int64_t>(1, d * (k - 1) + 1 - 2 * pad));
    w_sizes.push_back(k);
  }
  const at::Tensor in = stand_in_like(input, in_sizes), w = stand_in_like(weight, w_sizes);
  const std::optional<at::Tensor> b =
      bias && bias->defined() ? std::optional<at::Tensor>(stand_in_like(*bias, {groups}))
                              : std::nullopt;
  // vdev's own trial, below autocast (the call was already past it), not profiled.
  const at::DisableRecordFunctionGuard unprofiled;
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return trial_succeeds([&] {
    at::convolution(in, w, b, stride, padding, dilation, transposed, output_padding, groups);
  });
}

}  // namespace vdev::backend
