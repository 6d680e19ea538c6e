#include "backend/executor/out_kernel_layouts.h"

#include <ATen/TensorGeometry.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "backend/common/stand_in_trials.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

std::atomic<std::uint64_t> g_trials{0};
std::atomic<std::uint64_t> g_declined{0};

// Whether the plan's layouts may differ from CPU's: an argument or an output that is not
// contiguous. With contiguous arguments CPU's kernels and the meta kernels make contiguous
// outputs; where a meta kernel makes another layout of them (column-major linear algebra,
// cuFFT's), that output asks for the trial.
bool layouts_may_differ(const torch::jit::Stack& stack, std::size_t first, std::size_t nargs,
                        const std::vector<MetaReturn>& returns) {
  for (std::size_t i = first; i < first + nargs; ++i) {
    const bool other = any_tensor(stack[i], [](const at::Tensor& t) {
      return is_vdev_tensor(t) &&
             (!t.is_contiguous() || t.suggest_memory_format() != at::MemoryFormat::Contiguous);
    });
    if (other) return true;
  }
  for (const MetaReturn& r : returns) {
    for (const MetaTensor& m : r.tensors) {
      if (m.defined && !at::geometry_is_contiguous(m.sizes, m.strides)) return true;
    }
  }
  return false;
}

// The dimensions of more than one element, outermost first, of a non-overlapping and dense
// layout; nullopt for any other layout.
std::optional<std::vector<std::size_t>> dense_order(at::IntArrayRef sizes,
                                                    at::IntArrayRef strides) {
  std::vector<std::size_t> order;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (std::size_t k = order.size(); k-- > 0;) {
    if (strides[order[k]] != expected) return std::nullopt;
    expected *= sizes[order[k]];
  }
  return order;
}

enum class Verdict { kSame, kDifferent, kUnknown };

// Whether CPU's output `cpu` (of a trial, with small or real sizes) has the plan's layout `m`.
Verdict compare(const at::Tensor& cpu, const MetaTensor& m) {
  if (!m.defined || !cpu.defined()) {
    return m.defined == cpu.defined() ? Verdict::kSame : Verdict::kUnknown;
  }
  if (cpu.layout() != at::kStrided) return Verdict::kUnknown;
  if (cpu.dim() != static_cast<int64_t>(m.sizes.size())) return Verdict::kUnknown;
  for (int64_t s : m.sizes) {
    if (s == 0) return Verdict::kSame;  // nothing is written
  }
  for (std::size_t d = 0; d < m.sizes.size(); ++d) {
    // The small sizes keep 0 and 1; an output size computed from them may not.
    if ((cpu.size(static_cast<int64_t>(d)) > 1) != (m.sizes[d] > 1)) return Verdict::kUnknown;
  }
  const auto planned = dense_order(m.sizes, m.strides);
  if (!planned) return Verdict::kDifferent;  // a layout no kernel allocates: not risked
  const auto cpus = dense_order(cpu.sizes(), cpu.strides());
  if (!cpus) return Verdict::kUnknown;
  return *planned == *cpus ? Verdict::kSame : Verdict::kDifferent;
}

// The verdict for every output of one trial: kSame if all are laid out as CPU lays them out.
Verdict compare_all(const torch::jit::Stack& trial, const std::vector<MetaReturn>& returns) {
  if (trial.size() != returns.size()) return Verdict::kUnknown;
  Verdict all = Verdict::kSame;
  for (std::size_t r = 0; r < returns.size(); ++r) {
    const MetaReturn& m = returns[r];
    std::vector<at::Tensor> cpu;
    if (trial[r].isTensor()) {
      cpu.push_back(trial[r].toTensor());
    } else if (trial[r].isTensorList()) {
      cpu = trial[r].toTensorVector();
    } else if (!trial[r].isNone()) {
      return Verdict::kUnknown;
    }
    if (cpu.size() != m.tensors.size()) return Verdict::kUnknown;
    for (std::size_t k = 0; k < cpu.size(); ++k) {
      const Verdict v = compare(cpu[k], m.tensors[k]);
      if (v == Verdict::kDifferent) return v;
      if (v == Verdict::kUnknown) all = v;
    }
  }
  return all;
}

Verdict trial_verdict(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                      std::size_t first, std::size_t nargs, const std::vector<MetaReturn>& returns,
                      int64_t output_elements) {
  // Small stand-ins first: a trial runs once per plan on the calling thread, and one of the real
  // sizes may cost as much as the call (a matrix product). They keep every order between two
  // strides or are not made; the real sizes, whose stand-ins have the arguments' exact strides,
  // where small ones cannot be made, cannot run (backward operators) or cannot tell.
  for (const TrialSizes sizes : {TrialSizes::kSmall, TrialSizes::kReal}) {
    if (!trial_may_run(op, stack, first, nargs, sizes, output_elements)) continue;
    g_trials.fetch_add(1, std::memory_order_relaxed);
    const std::optional<torch::jit::Stack> trial =
        run_on_layout_stand_ins(op, stack, first, nargs, sizes);
    if (!trial) continue;
    const Verdict v = compare_all(*trial, returns);
    if (v != Verdict::kUnknown) return v;
  }
  return Verdict::kUnknown;
}

}  // namespace

bool out_kernel_keeps_layouts(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                              std::size_t first, std::size_t nargs,
                              const std::vector<MetaReturn>& returns, int64_t output_elements,
                              bool returns_vary) {
  if (!layouts_may_differ(stack, first, nargs, returns)) return true;
  if (!returns_vary &&
      trial_verdict(op, stack, first, nargs, returns, output_elements) == Verdict::kSame) {
    return true;
  }
  g_declined.fetch_add(1, std::memory_order_relaxed);
  return false;
}

std::uint64_t out_layout_trials() noexcept { return g_trials.load(std::memory_order_relaxed); }

std::uint64_t out_kernels_declined_for_layout() noexcept {
  return g_declined.load(std::memory_order_relaxed);
}

}  // namespace vdev::backend
