#include "backend/executor/allocated_layouts.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/strides.h>

#include <string_view>

#include "backend/common/meta_like.h"

namespace vdev::backend {
namespace {

// How a listed operator's kernel allocates its output:
//  * kContiguous: mse_loss_backward's zeros_like(input, LEGACY_CONTIGUOUS_MEMORY_FORMAT) in
//    Loss.cpp; TORCH_META_FUNC(_log_softmax_backward_data) in SoftMax.cpp; group norm and its
//    backward, whose input group_norm makes contiguous on CUDA (group_norm.cpp: only CPU and
//    PrivateUse1 keep a channels-last input, so vdev would follow CPU) and whose kernels allocate
//    like that input (native_group_norm, native_group_norm_backward);
//  * kLike: like an argument (binary_cross_entropy and its backward: empty_like(input) in Loss.cpp
//    and cuda/Loss.cu);
//  * kLikeSuggested: like an argument in its suggested memory format (native_dropout_backward:
//    empty_like(grad, grad.suggest_memory_format()) in cuda/Dropout.cu; CPU's grad * mask * scale
//    takes TensorIterator's layout, vdev takes CUDA's);
//  * kConvolution: in conv_memory_format of the input and the weight (cudnn_convolution and its
//    backward, cudnn/ConvShared.cpp; the meta kernels keep the input's format, or none for the
//    backward's gradients). `argument` is the input's position; the weight follows it.
enum class Allocation { kContiguous, kLike, kLikeSuggested, kConvolution };

struct AllocatedLike {
  std::string_view name;
  Allocation allocation;
  std::size_t argument = 0;
};
constexpr AllocatedLike kAllocatedLike[] = {
    {"aten::mse_loss_backward", Allocation::kContiguous},
    {"aten::_log_softmax_backward_data", Allocation::kContiguous},
    {"aten::native_group_norm", Allocation::kContiguous},
    {"aten::native_group_norm_backward", Allocation::kContiguous},
    {"aten::binary_cross_entropy", Allocation::kLike, 0},
    {"aten::binary_cross_entropy_backward", Allocation::kLike, 1},
    {"aten::native_dropout_backward", Allocation::kLikeSuggested, 0},
    {"aten::convolution", Allocation::kConvolution, 0},
    {"aten::convolution_backward", Allocation::kConvolution, 1},
};

std::vector<int64_t> contiguous(c10::IntArrayRef sizes) {
  const c10::DimVector strides = c10::contiguous_strides(sizes);
  return std::vector<int64_t>(strides.begin(), strides.end());
}

// Strides of `sizes` in `format`; nullopt when the format does not fit the sizes' rank (a
// convolution's bias gradient).
std::optional<std::vector<int64_t>> strides_in(c10::IntArrayRef sizes, c10::MemoryFormat format) {
  if (format == c10::MemoryFormat::Contiguous) return contiguous(sizes);
  const std::size_t rank = format == c10::MemoryFormat::ChannelsLast ? 4 : 5;
  if (sizes.size() != rank) return std::nullopt;
  return at::empty(sizes, at::TensorOptions().device(c10::kMeta).memory_format(format))
      .strides()
      .vec();
}

// The memory format CUDA gives a convolution's output and gradients
// (cudnn_conv_suggest_memory_format in aten/src/ATen/native/ConvUtils.h; CPU's
// mkldnn_conv_use_channels_last agrees): channels-last when the input or the weight is.
c10::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  const c10::MemoryFormat in = input.suggest_memory_format();
  const c10::MemoryFormat w = weight.suggest_memory_format();
  for (const c10::MemoryFormat f :
       {c10::MemoryFormat::ChannelsLast, c10::MemoryFormat::ChannelsLast3d}) {
    if (in == f || w == f) return f;
  }
  return c10::MemoryFormat::Contiguous;
}

}  // namespace

std::optional<std::vector<int64_t>> allocated_output_strides(const c10::FunctionSchema& schema,
                                                             const torch::jit::Stack& stack,
                                                             std::size_t first,
                                                             c10::IntArrayRef sizes) {
  for (const AllocatedLike& op : kAllocatedLike) {
    if (op.name != schema.name()) continue;
    if (op.allocation == Allocation::kContiguous) return contiguous(sizes);
    const c10::IValue& arg = stack[first + op.argument];
    if (!arg.isTensor()) return std::nullopt;
    if (op.allocation == Allocation::kConvolution) {
      const c10::IValue& weight = stack[first + op.argument + 1];
      if (!weight.isTensor()) return std::nullopt;
      return strides_in(sizes, conv_memory_format(arg.toTensor(), weight.toTensor()));
    }
    if (arg.toTensor().sizes() != sizes) return std::nullopt;
    const at::Tensor like = meta_like(arg.toTensor());
    const at::Tensor out = op.allocation == Allocation::kLikeSuggested
                               ? at::empty_like(like, like.suggest_memory_format())
                               : at::empty_like(like);
    return out.strides().vec();
  }
  return std::nullopt;
}

}  // namespace vdev::backend
