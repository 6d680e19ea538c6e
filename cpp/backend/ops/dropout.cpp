// native_dropout on vdev: F.dropout on an accelerator (ATen's is_fused_kernel_acceptable accepts
// PrivateUse1) and the fused form CUDA runs. It is the one random CPU kernel without a Generator
// argument (it draws from the CPU default generator), so the executor cannot key its engine; this
// kernel reserves the draw from the device's default generator and queues one task that computes
// exactly what CPU's native_dropout computes (aten/src/ATen/native/Dropout.cpp):
//   mask = bernoulli(1 - p); output = input * mask * (1 / (1 - p))   (scale 0 when p == 1)
// Evaluation mode (train=False) returns a copy and an all-true mask, and an empty input returns
// itself and an empty mask, as CPU does. A dtype CPU rejects (an integral input) raises at the
// call.
#include <ATen/core/Tensor.h>
#include <ATen/ops/clone.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <optional>
#include <tuple>

#include "backend/common/cpu_alias.h"
#include "backend/common/stand_in_trials.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/random/generator.h"
#include "backend/random/keyed_engine.h"

namespace vdev::backend {
namespace {

// CPU's native_dropout, in the order CPU computes it, into `output` and `mask`.
void dropout_into(at::Tensor output, const at::Tensor& mask, const at::Tensor& input, double keep,
                  double scale, at::Generator generator) {
  mask.bernoulli_(keep, std::move(generator));
  at::mul_out(output, input, mask);
  output.mul_(scale);  // an integral input fails here, as CPU's input.mul(mask).mul_(scale)
}

// CPU's errors at the call (dtypes CPU cannot drop out): the computation on one-element
// stand-ins, once per dtype (common/stand_in_trials.h).
void check_dropout_like_cpu(const at::Tensor& input, double keep, double scale) {
  static std::array<std::atomic<bool>, static_cast<std::size_t>(at::ScalarType::NumOptions)> ok{};
  std::atomic<bool>& known = ok[static_cast<std::size_t>(input.scalar_type())];
  if (known.load(std::memory_order_relaxed)) return;
  const at::Tensor in = stand_in_like(input, {1});
  dropout_into(at::empty_like(in), at::empty_like(in, in.options().dtype(at::kBool)), in, keep,
               scale, cpu_generator_for(RandomDraw{}));  // raises CPU's error
  known.store(true, std::memory_order_relaxed);
}

std::tuple<at::Tensor, at::Tensor> vdev_native_dropout(const at::Tensor& input, double p,
                                                       std::optional<bool> train) {
  const c10::DeviceGuard guard(input.device());
  const at::TensorOptions bool_options = input.options().dtype(at::kBool);
  if (input.numel() == 0) return {input, at::empty_like(input, bool_options)};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, bool_options)};

  const double keep = 1.0 - p;
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;
  check_dropout_like_cpu(input, keep, scale);
  const RandomDraw draw = reserve_draw(std::nullopt, input.device().index());
  at::Tensor output = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, bool_options);
  queue_launch({.stream = current_runtime_stream(input.device().index()),
                .name = "aten::native_dropout",
                .uses = {{input, Access::kRead}, {output, Access::kWrite}, {mask, Access::kWrite}},
                .elements = most_elements({&input})},
               [in = AliasSpec::of(input), out = AliasSpec::of(output), m = AliasSpec::of(mask),
                draw, keep, scale] {
                 dropout_into(out.make(), m.make(), in.make(), keep, scale,
                              cpu_generator_for(draw));
               });
  return {output, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_dropout", &vdev_native_dropout); }

}  // namespace vdev::backend
