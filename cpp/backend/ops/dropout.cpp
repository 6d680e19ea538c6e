// native_dropout on vdev: F.dropout on an accelerator (ATen's is_fused_kernel_acceptable accepts
// PrivateUse1) and the fused form CUDA runs. It is the one random CPU kernel without a Generator
// argument (it draws from the CPU default generator), so the executor cannot key its engine; this
// kernel reserves the draw from the device's default generator and queues one task that computes
// exactly what CPU's native_dropout computes (aten/src/ATen/native/Dropout.cpp):
//   mask = bernoulli(1 - p); output = input * mask * (1 / (1 - p))   (scale 0 when p == 1)
// Evaluation mode (train=False) returns a copy and an all-true mask, and an empty input returns
// itself and an empty mask, as CPU does.
#include <ATen/core/Tensor.h>
#include <ATen/ops/clone.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "backend/common/cpu_view.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/random/generator.h"
#include "backend/random/keyed_engine.h"

namespace vdev::backend {
namespace {

std::tuple<at::Tensor, at::Tensor> vdev_native_dropout(const at::Tensor& input, double p,
                                                       std::optional<bool> train) {
  const c10::DeviceGuard guard(input.device());
  const at::TensorOptions bool_options = input.options().dtype(at::kBool);
  if (input.numel() == 0) return {input, at::empty_like(input, bool_options)};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, bool_options)};

  const RandomDraw draw = reserve_draw(std::nullopt, input.device().index());
  at::Tensor output = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, bool_options);
  const double keep = 1.0 - p;
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;
  enqueue_task(current_runtime_stream(input.device().index()), "aten::native_dropout",
               [in = AliasSpec::of(input), out = AliasSpec::of(output), m = AliasSpec::of(mask),
                draw, keep, scale] {
                 at::Tensor mask_cpu = m.make();
                 at::Tensor out_cpu = out.make();
                 mask_cpu.bernoulli_(keep, cpu_generator_for(draw));
                 at::mul_out(out_cpu, in.make(), mask_cpu);
                 out_cpu.mul_(scale);
               });
  return {output, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_dropout", &vdev_native_dropout); }

}  // namespace vdev::backend
