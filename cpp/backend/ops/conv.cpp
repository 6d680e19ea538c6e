// Convolutions on vdev run as aten::convolution and aten::convolution_backward, whose PrivateUse1
// kernel is the boxed kernel (ops/fallback.cpp): the executor plans, checks and queues them as any
// operator (output sizes from the meta convolution once per signature; CPU's dtype checks on a
// convolution's own stand-ins, checks/conv_stand_ins.h; CUDA's output memory format,
// executor/allocated_layouts.h; a size hint by multiply-adds, executor/size_hint.h), and the task
// runs CPU's convolution on CPU aliases of the device bytes.
//
// ATen routes convolutions of backends it does not know to convolution_overrideable and
// convolution_backward_overrideable, from at::_convolution: reached only when _convolution is
// called itself (TorchScript traces record it), since vdev's kernel for convolution comes first.
// These kernels call the two operators above, which take the same arguments (the backward's
// bias_sizes from the weight, as ATen's convolution_backward computes it).
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>

namespace vdev::backend {
namespace {

at::Tensor vdev_convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                         const std::optional<at::Tensor>& bias,
                                         at::IntArrayRef stride, at::IntArrayRef padding,
                                         at::IntArrayRef dilation, bool transposed,
                                         at::IntArrayRef output_padding, int64_t groups) {
  return at::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                         groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vdev_convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const int64_t bias_size = weight.dim() < 2 ? 0
                            : transposed     ? weight.size(1) * groups
                                             : weight.size(0);
  return at::convolution_backward(grad_output, input, weight, at::IntArrayRef(bias_size), stride,
                                  padding, dilation, transposed, output_padding, groups,
                                  output_mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", vdev_convolution_overrideable);
  m.impl("convolution_backward_overrideable", vdev_convolution_backward_overrideable);
}

}  // namespace vdev::backend
