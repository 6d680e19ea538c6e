// The in-place random fills on vdev (uniform_, normal_, bernoulli_, random_, exponential_,
// geometric_, log_normal_, cauchy_): the path every factory such as torch.rand/randn/randint takes.
//
// They follow the way CPU and CUDA are built in ATen (aten/src/ATen/native/Distributions.cpp): the
// operator is ATen's own native function, whose templates (ATen/native/DistributionTemplates.h)
// check the arguments on the host with ATen's messages and then call a DispatchStub for the
// tensor's device type. vdev registers its PrivateUse1 kernels for those stubs. Each kernel
// reserves the operator's draw (backend/random/generator.h) and queues one task that runs CPU's
// kernel for the same stub on a CPU alias, with the engine keyed by that draw: so the values, the
// argument checks and the distributions are CPU's, while the host only validates and queues.
//
// Why not the executor's generic path: a fill is the commonest random operator and the generic
// path's plan-cache key and boxed capture cost more than the fill itself (benchmarks/
// bench_random.py); these kernels capture only the alias, the draw and the scalar arguments.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/TensorIterator.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/bernoulli_native.h>
#include <ATen/ops/cauchy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exponential_native.h>
#include <ATen/ops/geometric_native.h>
#include <ATen/ops/log_normal_native.h>
#include <ATen/ops/normal_native.h>
#include <ATen/ops/random_native.h>
#include <ATen/ops/uniform_native.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "backend/common/cpu_alias.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/random/generator.h"
#include "backend/random/keyed_engine.h"

namespace vdev::backend {
namespace {

constexpr auto kCPU = c10::DeviceType::CPU;

// Which dtypes CPU's kernel for one stub accepts, learnt once per dtype on the host by running the
// kernel on an empty CPU tensor: CPU's kernels check the dtype (raising CPU's error, such as
// NotImplementedError for "normal_kernel_cpu" on int) before they look at any element. Checking
// on the host raises at the call, as CPU and CUDA do, instead of at the next synchronize.
class DtypeCheck {
 public:
  template <typename Fill>
  void ensure(at::ScalarType dtype, const Fill& fill) {
    std::atomic<bool>& ok = accepted_[static_cast<std::size_t>(dtype)];
    if (ok.load(std::memory_order_acquire)) return;
    // A keyed engine, not CPU's default generator: some kernels draw a seed even for no element.
    fill(at::empty({0}, at::TensorOptions().dtype(dtype)), cpu_generator_for(RandomDraw{}));
    ok.store(true, std::memory_order_release);
  }

 private:
  std::array<std::atomic<bool>, static_cast<std::size_t>(at::ScalarType::NumOptions)> accepted_{};
};

// Checks `self` on the host as CPU's kernel would, reserves the draw and queues
// `fill(cpu_alias_of_self, keyed_cpu_generator)` on the current stream of self's device.
template <typename Fill>
void queue_fill(const char* name, DtypeCheck& check, const at::TensorBase& self,
                const std::optional<at::Generator>& gen, Fill fill) {
  check.ensure(self.scalar_type(), fill);
  const c10::DeviceIndex device = self.device().index();
  const RandomDraw draw = reserve_draw(gen, device);
  const at::Tensor filled(self);
  queue_launch(
      {.stream = current_runtime_stream(device),
       .name = name,
       .uses = {{filled, Access::kWrite}},
       .elements = most_elements({&self})},
      [out = AliasSpec::of(self), draw, fill] { fill(out.make(), cpu_generator_for(draw)); });
}

// The same for a stub that takes a nullary TensorIterator over the filled tensor.
template <typename CpuStubCall>
void queue_iterator_fill(const char* name, DtypeCheck& check, at::TensorIteratorBase& iter,
                         const std::optional<at::Generator>& gen, CpuStubCall call) {
  queue_fill(name, check, iter.tensor_base(0), gen, [call](const at::Tensor& cpu, at::Generator g) {
    auto cpu_iter = at::TensorIterator::borrowing_nullary_op(cpu);
    call(cpu_iter, std::move(g));
  });
}

void uniform_kernel(at::TensorIteratorBase& iter, double from, double to,
                    std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::uniform_", check, iter, gen, [from, to](auto& it, at::Generator g) {
    at::native::uniform_stub(kCPU, it, from, to, std::move(g));
  });
}

void normal_kernel(const at::TensorBase& self, double mean, double std,
                   std::optional<at::Generator> gen) {
  static DtypeCheck check;
  // CPU's normal kernel checks overlap through its TensorIterator; the other fills' templates (a
  // TensorIterator over self, or bernoulli's explicit check) already did on the host.
  at::assert_no_internal_overlap(self);
  queue_fill("aten::normal_", check, self, gen,
             [mean, std](const at::Tensor& cpu, at::Generator g) {
               at::native::normal_stub(kCPU, cpu, mean, std, std::move(g));
             });
}

void bernoulli_scalar_kernel(const at::TensorBase& self, double p,
                             std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_fill("aten::bernoulli_", check, self, gen, [p](const at::Tensor& cpu, at::Generator g) {
    at::native::bernoulli_scalar_stub(kCPU, cpu, p, std::move(g));
  });
}

void random_kernel(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::random_", check, iter, gen, [](auto& it, at::Generator g) {
    at::native::random_stub(kCPU, it, std::move(g));
  });
}

void random_from_to_kernel(at::TensorIteratorBase& iter, uint64_t range, int64_t base,
                           std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::random_", check, iter, gen, [range, base](auto& it, at::Generator g) {
    at::native::random_from_to_stub(kCPU, it, range, base, std::move(g));
  });
}

void random_full_64_bits_range_kernel(at::TensorIteratorBase& iter,
                                      std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::random_", check, iter, gen, [](auto& it, at::Generator g) {
    at::native::random_full_64_bits_range_stub(kCPU, it, std::move(g));
  });
}

void exponential_kernel(at::TensorIteratorBase& iter, double lambda,
                        std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::exponential_", check, iter, gen, [lambda](auto& it, at::Generator g) {
    at::native::exponential_stub(kCPU, it, lambda, std::move(g));
  });
}

void geometric_kernel(at::TensorIteratorBase& iter, double p, std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::geometric_", check, iter, gen, [p](auto& it, at::Generator g) {
    at::native::geometric_stub(kCPU, it, p, std::move(g));
  });
}

void log_normal_kernel(at::TensorIteratorBase& iter, double mean, double std,
                       std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::log_normal_", check, iter, gen,
                      [mean, std](auto& it, at::Generator g) {
                        at::native::log_normal_stub(kCPU, it, mean, std, std::move(g));
                      });
}

void cauchy_kernel(at::TensorIteratorBase& iter, double median, double sigma,
                   std::optional<at::Generator> gen) {
  static DtypeCheck check;
  queue_iterator_fill("aten::cauchy_", check, iter, gen,
                      [median, sigma](auto& it, at::Generator g) {
                        at::native::cauchy_stub(kCPU, it, median, sigma, std::move(g));
                      });
}

}  // namespace
}  // namespace vdev::backend

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(uniform_stub, &vdev::backend::uniform_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(normal_stub, &vdev::backend::normal_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(bernoulli_scalar_stub, &vdev::backend::bernoulli_scalar_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(random_stub, &vdev::backend::random_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(random_from_to_stub, &vdev::backend::random_from_to_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(random_full_64_bits_range_stub,
                              &vdev::backend::random_full_64_bits_range_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(exponential_stub, &vdev::backend::exponential_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(geometric_stub, &vdev::backend::geometric_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(log_normal_stub, &vdev::backend::log_normal_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(cauchy_stub, &vdev::backend::cauchy_kernel)
}  // namespace at::native

// ATen's native functions themselves, as CPU and CUDA register them (native_functions.yaml).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(at::native::uniform_));
  m.impl("normal_", TORCH_FN(at::native::normal_));
  m.impl("bernoulli_.float",
         TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, double, std::optional<at::Generator>)>(
             at::native::bernoulli_)));
  m.impl("random_",
         TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, std::optional<at::Generator>)>(
             at::native::random_)));
  m.impl("random_.from",
         TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, int64_t, std::optional<int64_t>,
                                              std::optional<at::Generator>)>(at::native::random_)));
  m.impl("random_.to",
         TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, int64_t, std::optional<at::Generator>)>(
             at::native::random_)));
  m.impl("exponential_", TORCH_FN(at::native::exponential_));
  m.impl("geometric_", TORCH_FN(at::native::geometric_));
  m.impl("log_normal_", TORCH_FN(at::native::log_normal_));
  m.impl("cauchy_", TORCH_FN(at::native::cauchy_));
}
