// Convolutions on vdev. ATen routes convolutions of backends it does not know to
// convolution_overrideable / convolution_backward_overrideable; these kernels make them tasks on
// the current stream: output shapes come from the meta convolution (cached per call signature),
// CPU's own checks (dtypes) run once per signature on stand-ins (backend/checks/stand_in_check.h:
// one channel per group, the smallest spatial size with an output), and the task runs the CPU
// convolution on CPU aliases of the device bytes, copying its result into the outputs (the CPU
// convolution kernels have no out= form).
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/checks/device_rules.h"
#include "backend/checks/stand_in_check.h"
#include "backend/common/cpu_alias.h"
#include "backend/common/meta_like.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
};

at::Tensor alias_or_undefined(const at::Tensor& t) { return t.defined() ? cpu_alias(t) : t; }

// Multiply-adds of one convolution pass, for the thread policy's size hint: each element of the
// output (transposed: of the input) sums weight.numel() / weight.size(0) products (input channels
// per group times the kernel's positions). `positions` is that output (or input).
std::uint64_t conv_multiply_adds(const at::Tensor& positions, const at::Tensor& weight) {
  if (weight.dim() == 0 || weight.size(0) == 0) return 0;
  std::uint64_t macs = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(positions.numel()),
                             static_cast<std::uint64_t>(weight.numel() / weight.size(0)), &macs)) {
    return UINT64_MAX;
  }
  return macs;
}

// What is known of one convolution signature: its output sizes, and whether CPU's checks failed on
// stand-ins (then the next call runs on the host, see vdev_convolution).
struct ConvSignature {
  std::vector<int64_t> sizes;
  mutable std::atomic<bool> settle_on_host{false};
};

// Stand-ins of the arguments that CPU's convolution accepts whenever the real ones have the sizes
// the meta convolution accepted: one channel per group, and the smallest spatial size that still
// has an output (transposed: 1); kernels keep their size. Only the dtype checks are left to fail.
bool cpu_accepts_conv_stand_ins(const at::Tensor& input, const at::Tensor& weight,
                                const at::Tensor& bias, const ConvParams& p) {
  const std::size_t spatial = static_cast<std::size_t>(weight.dim()) - 2;
  std::vector<int64_t> in_sizes{1, p.groups}, w_sizes{p.groups, 1};
  for (std::size_t i = 0; i < spatial; ++i) {
    const int64_t k = weight.size(static_cast<int64_t>(i) + 2);
    const int64_t d = i < p.dilation.size() ? p.dilation[i] : p.dilation.back();
    const int64_t pad = i < p.padding.size() ? p.padding[i] : p.padding.back();
    in_sizes.push_back(p.transposed ? 1 : std::max<int64_t>(1, d * (k - 1) + 1 - 2 * pad));
    w_sizes.push_back(k);
  }
  const std::optional<at::Tensor> b =
      bias.defined() ? std::optional<at::Tensor>(stand_in_like(bias, {p.groups})) : std::nullopt;
  const at::Tensor in = stand_in_like(input, in_sizes), w = stand_in_like(weight, w_sizes);
  auto trial = [&p](const at::Tensor& in, const at::Tensor& w, const std::optional<at::Tensor>& b) {
    return trial_succeeds([&] {
      at::convolution(in, w, b, p.stride, p.padding, p.dilation, p.transposed, p.output_padding,
                      p.groups);
    });
  };
  if (trial(in, w, b)) return true;
  // As for other operators: a second round with the real sizes, when small enough.
  if (!full_size_trial_affordable(input.numel() + weight.numel() + bias.numel())) return false;
  return trial(
      stand_in_like(input, input.sizes()), stand_in_like(weight, weight.sizes()),
      bias.defined() ? std::optional<at::Tensor>(stand_in_like(bias, bias.sizes())) : std::nullopt);
}

// The output sizes of a convolution, from the meta convolution once per call signature: it also
// checks the arguments (CPU's errors at the call), and costs more than the rest of the host's
// work for a convolution. The key holds everything the meta convolution reads.
class OutputSizes {
 public:
  std::shared_ptr<const ConvSignature> of(const at::Tensor& input, const at::Tensor& weight,
                                          const at::Tensor& bias, const ConvParams& p) {
    std::string key;
    auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    for (const at::Tensor* t : {&input, &weight, &bias}) {
      put(t->defined() ? static_cast<int64_t>(t->scalar_type()) : -1);
      if (!t->defined()) continue;
      put(t->dim());
      for (int64_t s : t->sizes()) put(s);
      for (int64_t s : t->strides()) put(s);
    }
    for (const std::vector<int64_t>* v : {&p.stride, &p.padding, &p.dilation, &p.output_padding}) {
      put(static_cast<int64_t>(v->size()));
      for (int64_t x : *v) put(x);
    }
    put(p.transposed ? 1 : 0);
    put(p.groups);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(key);
      if (it != sizes_.end()) return it->second;
    }
    const at::Tensor shape = at::convolution(
        meta_like(input), meta_like(weight),
        bias.defined() ? std::optional<at::Tensor>(meta_like(bias)) : std::nullopt, p.stride,
        p.padding, p.dilation, p.transposed, p.output_padding, p.groups);  // raises for bad input
    auto made = std::make_shared<ConvSignature>();
    made->sizes = shape.sizes().vec();
    if (!cpu_accepts_conv_stand_ins(input, weight, bias, p)) made->settle_on_host.store(true);
    std::lock_guard<std::mutex> lock(mu_);
    if (sizes_.size() >= 4096) sizes_.clear();
    sizes_.emplace(std::move(key), made);
    return made;
  }

  void register_for_fork() {
    vdev::rt::register_fork_lock(&mu_, vdev::rt::ForkLockLevel::kOperatorTables);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const ConvSignature>> sizes_;
};

OutputSizes& output_sizes() {
  static OutputSizes* cache = [] {
    auto* made = new OutputSizes;  // leaked: used until exit
    made->register_for_fork();
    return made;
  }();
  return *cache;
}

// The memory format CUDA gives a convolution's output and gradients
// (cudnn_conv_suggest_memory_format in aten/src/ATen/native/ConvUtils.h; CPU's
// mkldnn_conv_use_channels_last agrees): channels-last when the input or the weight is.
at::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  const at::MemoryFormat in = input.suggest_memory_format();
  const at::MemoryFormat w = weight.suggest_memory_format();
  for (const at::MemoryFormat f :
       {at::MemoryFormat::ChannelsLast, at::MemoryFormat::ChannelsLast3d}) {
    if (in == f || w == f) return f;
  }
  return at::MemoryFormat::Contiguous;
}

at::Tensor vdev_convolution(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias_opt, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                            at::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  check_same_device("wrapper_PrivateUse1__convolution_overrideable",
                    {{"input", &input}, {"weight", &weight}, {"bias", &bias}});
  const c10::DeviceGuard guard(input.device());
  ConvParams p{stride.vec(),         padding.vec(), dilation.vec(),
               output_padding.vec(), transposed,    groups};
  const std::shared_ptr<const ConvSignature> sig = output_sizes().of(input, weight, bias, p);
  at::Tensor out =
      at::empty(sig->sizes, input.options().memory_format(conv_memory_format(input, weight)));
  if (C10_UNLIKELY(sig->settle_on_host.load(std::memory_order_relaxed)) &&
      may_settle_on_the_host()) {
    // CPU's checks failed on stand-ins: run on the host on the real arguments, which raises CPU's
    // error at the call, or shows that the stand-ins were at fault.
    out.copy_(at::convolution(input.cpu(), weight.cpu(),
                              bias.defined() ? std::optional<at::Tensor>(bias.cpu()) : std::nullopt,
                              p.stride, p.padding, p.dilation, p.transposed, p.output_padding,
                              p.groups));
    sig->settle_on_host.store(false, std::memory_order_relaxed);
    return out;
  }
  queue_launch({.stream = current_runtime_stream(input.device().index()),
                .name = "aten::convolution_overrideable",
                .uses = {{input, Access::kRead},
                         {weight, Access::kRead},
                         {bias, Access::kRead},
                         {out, Access::kWrite}},
                .elements = most_elements({&input, &weight, &out}),
                .multiply_adds = conv_multiply_adds(transposed ? input : out, weight)},
               [in = cpu_alias(input), w = cpu_alias(weight), b = alias_or_undefined(bias),
                o = cpu_alias(out), p]() mutable {
                 o.copy_(at::convolution(
                     in, w, b.defined() ? std::optional<at::Tensor>(b) : std::nullopt, p.stride,
                     p.padding, p.dilation, p.transposed, p.output_padding, p.groups));
               });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vdev_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  check_same_device("wrapper_PrivateUse1__convolution_backward_overrideable",
                    {{"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}});
  const c10::DeviceGuard guard(input.device());
  const int64_t bias_size = transposed ? weight.size(1) * groups : weight.size(0);
  const at::MemoryFormat format = conv_memory_format(input, weight);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty(input.sizes(), input.options().memory_format(format));
  if (output_mask[1])
    grad_weight = at::empty(weight.sizes(), weight.options().memory_format(format));
  if (output_mask[2]) grad_bias = at::empty_strided({bias_size}, {1}, weight.options());
  ConvParams p{stride.vec(),         padding.vec(), dilation.vec(),
               output_padding.vec(), transposed,    groups};
  queue_launch(
      {.stream = current_runtime_stream(input.device().index()),
       .name = "aten::convolution_backward_overrideable",
       .uses = {{grad_output, Access::kRead},
                {input, Access::kRead},
                {weight, Access::kRead},
                {grad_input, Access::kWrite},
                {grad_weight, Access::kWrite},
                {grad_bias, Access::kWrite}},
       .elements = most_elements({&grad_output, &input, &weight}),
       // grad_input and grad_weight each cost about the forward's multiply-adds.
       .multiply_adds =
           std::min(conv_multiply_adds(transposed ? input : grad_output, weight), UINT64_MAX / 2) *
           (int{output_mask[0]} + int{output_mask[1]})},
      [go = cpu_alias(grad_output), in = cpu_alias(input), w = cpu_alias(weight),
       gi = alias_or_undefined(grad_input), gw = alias_or_undefined(grad_weight),
       gb = alias_or_undefined(grad_bias), p, bias_size, output_mask]() mutable {
        auto [ri, rw, rb] = at::convolution_backward(go, in, w, std::vector<int64_t>{bias_size},
                                                     p.stride, p.padding, p.dilation, p.transposed,
                                                     p.output_padding, p.groups, output_mask);
        if (gi.defined()) gi.copy_(ri);
        if (gw.defined()) gw.copy_(rw);
        if (gb.defined()) gb.copy_(rb);
      });
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", vdev_convolution);
  m.impl("convolution_backward_overrideable", vdev_convolution_backward);
}

}  // namespace vdev::backend
