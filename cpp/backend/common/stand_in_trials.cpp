#include "backend/common/stand_in_trials.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

thread_local std::uint64_t t_trial_warnings = 0;  // warnings the trials on this thread dropped

// Installed for a trial with c10's own WarningHandlerGuard: counts, and shows nothing.
class DiscardWarnings final : public c10::WarningHandler {
  void process(const c10::Warning&) override { ++t_trial_warnings; }
};

}  // namespace

// Whether CPU's kernel may run on stand-ins at all: an aten operator (a custom operator's kernel
// may have side effects), no assertion (_assert_async and friends: the stand-in's 0 always fails
// them, and they are queued on CUDA), nothing drawn from CPU's default generator.
bool may_run_on_stand_ins(const c10::OperatorHandle& op) {
  const std::string_view name = op.schema().name();
  if (name.substr(0, 6) != "aten::") return false;
  if (name.find("assert") != std::string_view::npos) return false;
  return !op.hasTag(at::Tag::nondeterministic_seeded) ||
         generator_argument(op.schema()).has_value();
}

bool is_backward_operator(const c10::OperatorHandle& op) {
  return op.schema().name().find("_backward") != std::string::npos;
}

namespace {

bool small_stand_ins_may_run(const c10::OperatorHandle& op) {
  return may_run_on_stand_ins(op) && !is_backward_operator(op);
}

// The second round's stand-ins hold at most this many elements in all (64 MiB of float32).
constexpr int64_t kFullSizeBudget = int64_t{1} << 24;

// The sizes of the first round: every size of the call's vdev tensors mapped to the smallest
// values that keep their order and equalities (0 and 1 stay; the others become 2, 3, ... in
// increasing order). Sizes that are equal stay equal and sizes that differ stay different, so a
// check that compares sizes (broadcasting, matching index shapes, a mask against its tensor)
// decides as it does for the real call; collapsing every size to 1 made [2] and [3] broadcast.
// The sizes of CPU tensor arguments (index tensors), which keep their real sizes and values, are
// fixed points of the map, so vdev sizes keep their relation to those too.
class SmallSizes {
 public:
  SmallSizes(const torch::jit::Stack& stack, std::size_t first, std::size_t nargs) {
    std::vector<std::pair<int64_t, bool>> sizes;  // (size, fixed)
    for (std::size_t i = first; i < first + nargs; ++i) {
      for_each_tensor(stack[i], [&](const at::Tensor& t) {
        if (!t.defined()) return;
        const bool fixed = !is_vdev_tensor(t);
        for (int64_t s : t.sizes()) {
          if (s > 1) sizes.emplace_back(s, fixed);
        }
      });
    }
    // By size, a fixed occurrence first: a size is fixed if any CPU tensor has it.
    std::sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    int64_t next = 2;  // never above the size it is given to, so fixed sizes stay reachable
    for (const auto& [size, fixed] : sizes) {
      if (!map_.empty() && map_.back().first == size) continue;
      const int64_t to = fixed ? size : next;
      map_.emplace_back(size, to);
      next = to + 1;
    }
  }

  int64_t operator()(int64_t s) const {
    if (s <= 1) return s;
    auto it = std::lower_bound(map_.begin(), map_.end(), std::make_pair(s, int64_t{0}));
    return it->second;
  }

 private:
  std::vector<std::pair<int64_t, int64_t>> map_;  // (size, small size), by size
};

// The elements of every vdev tensor argument, counting a tensor passed twice twice; with `small`,
// of their small stand-ins.
int64_t vdev_elements(const torch::jit::Stack& stack, std::size_t first, std::size_t nargs,
                      const SmallSizes* small = nullptr) {
  int64_t n = 0;
  for (std::size_t i = first; i < first + nargs; ++i) {
    for_each_tensor(stack[i], [&](const at::Tensor& t) {
      if (!is_vdev_tensor(t)) return;
      int64_t elements = 1;
      for (int64_t s : t.sizes()) elements *= small != nullptr ? (*small)(s) : s;
      n += elements;
    });
  }
  return n;
}

// Small stand-ins are unsafe where a kernel trusts a kernel_size argument against its weight's
// sizes (CPU's slow_conv_transpose2d/3d and slow_conv3d run gemm over kernel_size without a check)
// or a CPU integer tensor's values against them (below): such calls go straight to the real
// sizes.
bool small_round_is_safe(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                         std::size_t first, std::size_t nargs, const SmallSizes& small) {
  for (const c10::Argument& a : schema.arguments()) {
    if (a.name() == "kernel_size") return false;
  }
  // A CPU integer tensor keeps its real values (indices, lengths) while the vdev tensors shrink:
  // kernels that trust them (_unsafe_index, segment_reduce with unsafe=True) would read out of
  // bounds.
  for (std::size_t i = first; i < first + nargs; ++i) {
    const bool cpu_integers = any_tensor(stack[i], [](const at::Tensor& t) {
      return t.defined() && t.device().is_cpu() && !t.unsafeGetTensorImpl()->is_wrapped_number() &&
             (c10::isIntegralType(t.scalar_type(), /*includeBool=*/false));
    });
    if (cpu_integers) return false;
  }
  // The small sizes keep those of CPU tensors: with large CPU arguments they may not be small.
  return full_size_trial_affordable(vdev_elements(stack, first, nargs, &small));
}

// Fills `values` with a stand-in's value for `like`: 1 (floating and complex) or 0.
void fill_as_stand_in(const at::Tensor& values, const at::Tensor& like) {
  if (like.is_floating_point() || like.is_complex()) {
    values.fill_(1);
  } else {
    values.zero_();
  }
}

// A stand-in for `like` with its layout. Of the real sizes and non-overlapping and dense: its
// strides exactly. Otherwise (other sizes, or gaps and overlaps, whose storage may be far larger
// than the tensor: a column of a large matrix): its broadcast dimensions (stride 0, more than one
// element) broadcast, the others dense in the order of `like`'s strides, outermost first; throws
// where that order cannot be kept between two dimensions of more than one element (equal strides:
// overlapping elements). The strides of dimensions of size 1 address nothing; dense, they may
// tie where `like`'s differ.
at::Tensor layout_stand_in(const at::Tensor& like, at::IntArrayRef sizes) {
  const auto options = like.options().device(c10::kCPU);
  at::Tensor s;
  if (sizes.equals(like.sizes()) && like.is_non_overlapping_and_dense()) {
    s = at::empty_strided(like.sizes(), like.strides(), options);
  } else {
    const std::size_t dims = sizes.size();
    std::vector<int64_t> base(sizes.begin(), sizes.end());
    for (std::size_t d = 0; d < dims; ++d) {
      if (like.stride(static_cast<int64_t>(d)) == 0 && like.size(static_cast<int64_t>(d)) > 1) {
        base[d] = 1;
      }
    }
    std::vector<std::size_t> order(dims);
    for (std::size_t d = 0; d < dims; ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return like.stride(static_cast<int64_t>(a)) > like.stride(static_cast<int64_t>(b));
    });
    std::vector<int64_t> strides(dims);
    int64_t next = 1;
    for (std::size_t k = dims; k-- > 0;) {
      strides[order[k]] = next;
      next *= std::max<int64_t>(base[order[k]], 1);
    }
    s = at::empty_strided(base, strides, options).expand(sizes);
    for (std::size_t a = 0; a < dims; ++a) {
      for (std::size_t b = a + 1; b < dims; ++b) {
        if (sizes[a] <= 1 || sizes[b] <= 1) continue;  // a stride that addresses nothing
        const auto i = static_cast<int64_t>(a), j = static_cast<int64_t>(b);
        const int real = (like.stride(i) > like.stride(j)) - (like.stride(i) < like.stride(j));
        const int kept = (s.stride(i) > s.stride(j)) - (s.stride(i) < s.stride(j));
        TORCH_CHECK(real == kept, "vdev: a stand-in cannot keep this layout");
      }
    }
  }
  // The whole storage: fill_ refuses a tensor whose elements overlap.
  fill_as_stand_in(at::empty({0}, options).set_(s.storage()), like);
  if (like.is_conj()) s._set_conj(true);
  if (like.is_neg()) s._set_neg(true);
  return s;
}

// The stand-in of one vdev tensor (see the header); the same tensor passed twice gets the same one.
// `small` maps the sizes of the first round; without it, stand-ins have the real sizes.
class StandIns {
 public:
  // `keep_layout`: each stand-in has its tensor's layout (layout_stand_in).
  explicit StandIns(const SmallSizes* small, bool keep_layout = false)
      : small_(small), keep_layout_(keep_layout) {}

  at::Tensor of(const at::Tensor& t) {
    if (!is_vdev_tensor(t)) return t;  // undefined, or a CPU argument: the call's own
    auto it = made_.find(t.unsafeGetTensorImpl());
    if (it != made_.end()) return it->second;
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    if (small_ != nullptr) {
      for (int64_t& s : sizes) s = (*small_)(s);
    }
    at::Tensor s = keep_layout_ ? layout_stand_in(t, sizes) : stand_in_like(t, sizes);
    if (!keep_layout_ && small_ == nullptr &&
        t.suggest_memory_format() != at::MemoryFormat::Contiguous) {
      s = s.contiguous(t.suggest_memory_format());  // kernels pick their path by it
    }
    made_.emplace(t.unsafeGetTensorImpl(), s);
    return s;
  }

 private:
  const SmallSizes* small_;
  bool keep_layout_;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> made_;
};

// One round: CPU's kernel on stand-ins (small ones with `small`, else of the real sizes); on
// success, the undefined single-tensor returns into `undefined_returns` (if given).
// `keep_layout`: stand-ins with their tensors' layouts; the trial's returns are left in `returns`
// (if given).
bool trial_round(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                 std::size_t nargs, const SmallSizes* small, std::vector<bool>* undefined_returns,
                 bool keep_layout = false, torch::jit::Stack* returns = nullptr) {
  const std::optional<std::size_t> g = generator_argument(op.schema());
  torch::jit::Stack trial_stack;
  trial_stack.reserve(nargs);
  try {
    StandIns stand_ins(small, keep_layout);
    for (std::size_t i = 0; i < nargs; ++i) {
      if (g && i == *g) {
        trial_stack.emplace_back(at::detail::createCPUGenerator());  // draws nothing of the user's
      } else {
        trial_stack.push_back(
            map_tensors(stack[first + i], [&](const at::Tensor& t) { return stand_ins.of(t); }));
      }
    }
  } catch (const std::exception&) {
    return true;  // a dtype CPU cannot even fill: nothing to check with
  }
  // Below autocast: CPU autocast on the host must not recast the stand-ins (the call was already
  // past vdev's own autocast).
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  if (!trial_succeeds([&] { op.callBoxed(&trial_stack); })) return false;
  if (undefined_returns != nullptr) {
    undefined_returns->clear();
    for (const c10::IValue& r : trial_stack) {
      undefined_returns->push_back(r.isNone() || (r.isTensor() && !r.toTensor().defined()));
    }
  }
  if (returns != nullptr) *returns = std::move(trial_stack);
  return true;
}

}  // namespace

at::Tensor stand_in_like(const at::Tensor& like, at::IntArrayRef sizes) {
  at::Tensor s = at::empty(sizes, like.options().device(c10::kCPU));
  fill_as_stand_in(s, like);
  if (like.is_conj()) s._set_conj(true);
  if (like.is_neg()) s._set_neg(true);
  return s;
}

std::uint64_t trial_warnings_dropped() { return t_trial_warnings; }

bool full_size_trial_affordable(int64_t elements) { return elements <= kFullSizeBudget; }

bool trial_succeeds(const std::function<void()>& trial) {
  static DiscardWarnings discard;  // stateless: shared by every thread
  const c10::WarningUtils::WarningHandlerGuard quiet(&discard);
  try {
    trial();
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

bool trial_may_run(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                   std::size_t nargs, TrialSizes sizes, int64_t output_elements) {
  if (sizes == TrialSizes::kSmall) {
    return small_stand_ins_may_run(op) &&
           small_round_is_safe(op.schema(), stack, first, nargs, SmallSizes(stack, first, nargs));
  }
  return may_run_on_stand_ins(op) &&
         full_size_trial_affordable(vdev_elements(stack, first, nargs) + output_elements);
}

bool run_on_stand_ins(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                      std::size_t first, std::size_t nargs, TrialSizes sizes,
                      std::vector<bool>* undefined_returns) {
  // vdev's own trial, not the program's operator: the profiler does not show it.
  const at::DisableRecordFunctionGuard unprofiled;
  const SmallSizes small(stack, first, nargs);
  return trial_round(op, stack, first, nargs, sizes == TrialSizes::kSmall ? &small : nullptr,
                     undefined_returns);
}

std::optional<torch::jit::Stack> run_on_layout_stand_ins(const c10::OperatorHandle& op,
                                                         const torch::jit::Stack& stack,
                                                         std::size_t first, std::size_t nargs,
                                                         TrialSizes sizes) {
  // vdev's own trial, not the program's operator: the profiler does not show it.
  const at::DisableRecordFunctionGuard unprofiled;
  const SmallSizes small(stack, first, nargs);
  torch::jit::Stack returns;
  if (!trial_round(op, stack, first, nargs, sizes == TrialSizes::kSmall ? &small : nullptr,
                   /*undefined_returns=*/nullptr, /*keep_layout=*/true, &returns) ||
      returns.empty()) {  // empty: no stand-in could be made
    return std::nullopt;
  }
  return returns;
}

}  // namespace vdev::backend