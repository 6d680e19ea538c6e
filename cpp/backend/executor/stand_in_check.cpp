#include "backend/executor/stand_in_check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/common/sync_debug.h"
#include "backend/executor/launch_plan.h"
#include "backend/executor/tensor_args.h"

namespace vdev::backend {
namespace {

// Installed for a trial with c10's own WarningHandlerGuard.
class DiscardWarnings final : public c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

bool checked_on_stand_ins(const c10::OperatorHandle& op) {
  const std::string_view name = op.schema().name();
  if (name.substr(0, 6) != "aten::") return false;
  if (name.find("_backward") != std::string_view::npos) return false;
  // _assert_async and friends: the stand-in's 0 always fails them, and they are queued on CUDA.
  if (name.find("assert") != std::string_view::npos) return false;
  return !op.hasTag(at::Tag::nondeterministic_seeded) ||
         generator_argument(op.schema()).has_value();
}

// Size-1 stand-ins are unsafe where a kernel trusts a kernel_size argument against its weight's
// sizes (CPU's slow_conv_transpose2d/3d and slow_conv3d run gemm over kernel_size without a check):
// such operators go straight to the real sizes.
bool size_one_round_is_safe(const c10::FunctionSchema& schema) {
  for (const c10::Argument& a : schema.arguments()) {
    if (a.name() == "kernel_size") return false;
  }
  return true;
}

// The second round's stand-ins hold at most this many elements in all (64 MiB of float32).
constexpr int64_t kFullSizeBudget = int64_t{1} << 24;

// The stand-in of one vdev tensor (see the header); the same tensor passed twice gets the same one.
class StandIns {
 public:
  explicit StandIns(bool full_size) : full_size_(full_size) {}

  at::Tensor of(const at::Tensor& t) {
    if (!is_vdev_tensor(t)) return t;  // undefined, or a CPU argument: the call's own
    auto it = made_.find(t.unsafeGetTensorImpl());
    if (it != made_.end()) return it->second;
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    if (!full_size_) {
      for (int64_t& s : sizes) s = s == 0 ? 0 : 1;
    }
    at::Tensor s = stand_in_like(t, sizes);
    if (full_size_ && t.suggest_memory_format() != at::MemoryFormat::Contiguous) {
      s = s.contiguous(t.suggest_memory_format());  // kernels pick their path by it
    }
    made_.emplace(t.unsafeGetTensorImpl(), s);
    return s;
  }

 private:
  bool full_size_;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> made_;
};

// The elements of every vdev tensor argument, counting a tensor passed twice twice.
int64_t vdev_elements(const torch::jit::Stack& stack, std::size_t first, std::size_t nargs) {
  int64_t n = 0;
  for (std::size_t i = first; i < first + nargs; ++i) {
    for_each_tensor(stack[i], [&](const at::Tensor& t) {
      if (is_vdev_tensor(t)) n += t.numel();
    });
  }
  return n;
}

// One round: CPU's kernel on stand-ins (of size 1, or of the real sizes).
bool trial_round(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                 std::size_t nargs, bool full_size) {
  const std::optional<std::size_t> g = generator_argument(op.schema());
  torch::jit::Stack trial_stack;
  trial_stack.reserve(nargs);
  try {
    StandIns stand_ins(full_size);
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
  return trial_succeeds([&] { op.callBoxed(&trial_stack); });
}

}  // namespace

at::Tensor stand_in_like(const at::Tensor& like, at::IntArrayRef sizes) {
  at::Tensor s = at::empty(sizes, like.options().device(c10::kCPU));
  if (like.is_floating_point() || like.is_complex()) {
    s.fill_(1);
  } else {
    s.zero_();
  }
  if (like.is_conj()) s._set_conj(true);
  if (like.is_neg()) s._set_neg(true);
  return s;
}

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

bool cpu_accepts_stand_ins(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                           std::size_t first, std::size_t nargs, int64_t output_elements) {
  if (!checked_on_stand_ins(op)) return true;
  if (size_one_round_is_safe(op.schema()) &&
      trial_round(op, stack, first, nargs, /*full_size=*/false)) {
    return true;
  }
  // Size-1 stand-ins fail many size checks that the real sizes pass (a pooling kernel of 3, a
  // layer norm over 768 features): a second round with the real sizes settles those without a
  // host wait, when they (inputs and outputs) are small enough to compute on the host once.
  if (!full_size_trial_affordable(vdev_elements(stack, first, nargs) + output_elements)) {
    return false;
  }
  return trial_round(op, stack, first, nargs, /*full_size=*/true);
}

bool may_settle_on_the_host() {
  return sync_debug_mode() == static_cast<int>(SyncDebugMode::kDisabled);
}

}  // namespace vdev::backend
