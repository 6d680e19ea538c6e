#include "backend/executor/express.h"

#include <ATen/Context.h>
#include <c10/core/DeviceGuard.h>

#include <array>
#include <memory>
#include <string>
#include <unordered_map>

#include "backend/checks/call_checks.h"
#include "backend/checks/capability_rules.h"
#include "backend/checks/device_rules.h"
#include "backend/checks/overlap.h"
#include "backend/common/operator_uses.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/common/vdev_device.h"
#include "backend/executor/enqueue.h"
#include "backend/executor/express_task.h"
#include "backend/executor/plan_cache.h"

namespace vdev::backend {
namespace {

// Per thread: call signatures (their plan and argument views, executor/express_task.h) by express
// key (make_key: the operator record's address, the modes, the arguments as the plan cache
// encodes them, coefficients by kind); a null signature: the lane declines such calls. Bounded
// like the plan cache: cleared when it grows past kMaxEntries.
constexpr std::size_t kMaxEntries = 1024;
using Signatures = std::unordered_map<std::string, std::shared_ptr<const ExpressSignature>>;

thread_local std::uint64_t t_express_calls = 0;
thread_local std::uint64_t t_express_misses = 0;

// Whether the lane takes the call's tensors: every one a defined strided vdev tensor or a Python
// number (a wrapped 0-dim CPU tensor, which CUDA's kernels take too), and some vdev tensor with
// elements (all-empty calls get CPU's checks on the boxed path, checks/empty_inputs.h). Which
// devices they may be on is the device rule's to say (checks/device_rules.h), as on the boxed
// path. `tensors` gets argument i's tensor at i (nullptr for other arguments).
bool lane_takes_tensors(c10::ArrayRef<UnboxedArg> args,
                        std::array<const at::Tensor*, ExpressSignature::kMaxArgs>& tensors) {
  if (args.size() > tensors.size()) return false;
  bool elements = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor* t = args[i].tensor;
    tensors[i] = t;
    if (t == nullptr) continue;
    if (!t->defined()) return false;
    if (t->device().type() == kVdev) {
      if (t->layout() != c10::kStrided || t->is_quantized()) return false;
      elements = elements || t->numel() != 0;
    } else if (!(t->device().is_cpu() && t->unsafeGetTensorImpl()->is_wrapped_number())) {
      return false;
    }
  }
  return elements;
}

// Whether an in-place call's written self overlaps itself or another argument, by the boxed
// path's overlap rule (checks/overlap.h): such calls run on the host.
bool written_self_overlaps(c10::ArrayRef<UnboxedArg> args) {
  c10::SmallVector<ArgumentTensor, ExpressSignature::kMaxArgs> tensors;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor* t = args[i].tensor;
    if (t != nullptr && is_vdev_tensor(*t)) {
      tensors.push_back({t, i, /*written=*/i == 0, /*out=*/false, /*in_list=*/false});
    }
  }
  return written_tensors_overlap(tensors);
}

// A coefficient's kind, for the key.
char scalar_kind(const c10::IValue& v) {
  if (v.isInt()) return 'i';
  if (v.isDouble()) return 'd';
  if (v.isComplexDouble()) return 'z';
  if (v.isBool()) return 'b';
  return '\0';  // symbolic: not keyed
}

bool make_key(std::string& key, const ExpressOperator& op, c10::ArrayRef<UnboxedArg> args) {
  key.clear();  // keeps its capacity
  const ExpressOperator* id = &op;
  key.append(reinterpret_cast<const char*>(&id), sizeof(id));
  append_modes_key(key);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const UnboxedArg& a = args[i];
    if (a.tensor != nullptr) {
      append_tensor_key(key, *a.tensor);
    } else if ((op.coefficient_args >> i) & 1U) {
      const char kind = scalar_kind(a.value);
      if (kind == '\0') return false;
      key.push_back(kind);
    } else if (!append_value_key(key, a.value)) {
      return false;
    }
  }
  return true;
}

// Whether calls under `plan` can take the lane: queued, one tensor return that is fresh or (in
// place) self at its own size, no Generator, nothing that must happen on the host.
bool lane_plan(const LaunchPlan& plan, const ExpressOperator& op, const at::Tensor& self) {
  if (!plan.ok || plan.returns_from_cpu_values || plan.warns_on_host || plan.generator_arg ||
      plan.returns.size() != 1 || plan.returns[0].kind != MetaReturn::Tensor ||
      !plan.out_args.empty()) {
    return false;
  }
  const MetaTensor& m = plan.returns[0].tensors[0];
  if (!m.defined) return false;
  if (op.writes_self) return plan.aliased[0] == 0 && self.sizes() == c10::IntArrayRef(m.sizes);
  return plan.all_fresh;
}

// A boxed copy of the arguments (the copies are what a boxed call makes anyway).
torch::jit::Stack boxed(c10::ArrayRef<UnboxedArg> args) {
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const UnboxedArg& a : args) {
    stack.push_back(a.tensor != nullptr ? c10::IValue(*a.tensor) : a.value);
  }
  return stack;
}

// A miss: the boxed path's checks and plan for this signature (on a boxed copy of the arguments;
// the copies are what a boxed call makes anyway). Raises what the boxed path would raise.
std::shared_ptr<const ExpressSignature> signature_on_miss(const ExpressOperator& op,
                                                          c10::ArrayRef<UnboxedArg> args) {
  torch::jit::Stack stack = boxed(args);
  const CheckedCall call = check_call(op.handle, stack);
  if (!call.may_queue()) return nullptr;
  std::shared_ptr<const LaunchPlan> plan = find_or_make_plan(op.handle, stack, 0, args.size());
  if (!lane_plan(*plan, op, *args[0].tensor)) return nullptr;
  return ExpressSignature::make(op.handle, std::move(plan), args, op.coefficient_args,
                                op.writes_self);
}

}  // namespace

ExpressOperator::ExpressOperator(c10::OperatorHandle op)
    : handle(std::move(op)), devices(&device_rule(handle)) {
  const c10::FunctionSchema& schema = handle.schema();
  const auto& returns = schema.returns();
  writes_self = returns.size() == 1 && returns[0].alias_info() != nullptr &&
                returns[0].alias_info()->isWrite();
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size() && i < 32; ++i) {
    const std::string& n = args[i].name();
    if (args[i].type()->kind() == c10::TypeKind::NumberType &&
        (n == "alpha" || n == "value" || n == "weight")) {
      coefficient_args |= 1U << i;
    }
  }
}

bool try_express(const ExpressOperator& op, c10::ArrayRef<UnboxedArg> args, at::Tensor& result) {
  std::array<const at::Tensor*, ExpressSignature::kMaxArgs> tensors{};
  if (!lane_takes_tensors(args, tensors)) return false;
  // The boxed path's checks in its order (checks/call_checks.h): the capability profile, then the
  // device rule (raising CUDA's error for tensors on two devices), then the overlap rule.
  refuse_operator_the_profile_lacks(op.handle);
  const std::optional<c10::Device> device = check_operator_devices(
      *op.devices, c10::ArrayRef<const at::Tensor*>(tensors.data(), args.size()));
  if (!device || !device->has_index()) return false;
  if (op.writes_self && written_self_overlaps(args)) return false;

  thread_local std::string key;
  thread_local Signatures signatures;
  if (!make_key(key, op, args)) return false;
  auto it = signatures.find(key);
  if (it == signatures.end()) {
    ++t_express_misses;
    std::string miss_key = key;  // making the plan may come back here (a meta kernel's calls)
    std::shared_ptr<const ExpressSignature> sig = signature_on_miss(op, args);
    if (signatures.size() >= kMaxEntries) signatures.clear();
    it = signatures.emplace(std::move(miss_key), std::move(sig)).first;
  }
  if (!it->second) return false;
  // CPU's checks failed on stand-ins: the boxed path settles the call on the host. The entry goes,
  // so that the next call looks up the plan again (the boxed path may have made a new one).
  const LaunchPlan& plan = *it->second->plan;
  if (plan.settle_on_host.load(std::memory_order_relaxed)) {
    signatures.erase(it);
    return false;
  }
  std::shared_ptr<const ExpressSignature> sig = it->second;  // the table may change meanwhile

  const c10::DeviceGuard guard(*device);
  if (!op.writes_self) result = fresh_output(plan.returns[0].tensors[0]);
  // What the call reads and writes, for the launch observers only: by the boxed path's rules, on
  // a boxed copy of its arguments.
  auto uses = [&](UseVisitor visit) {
    torch::jit::Stack stack = boxed(args);
    c10::IValue fresh;
    c10::SmallVector<const c10::IValue*, 1> fresh_outputs;
    if (!op.writes_self) {
      fresh = result;
      fresh_outputs.push_back(&fresh);
    }
    visit_operator_uses(op.handle, stack, 0, fresh_outputs, visit);
  };
  const Launch launch{.stream = current_runtime_stream(device->index()),
                      .name = plan.task_name,
                      .uses = LaunchUses::derived(uses),
                      .elements = plan.size_hint};
  emplace_launch<ExpressTask>(launch, std::move(sig), args, op.writes_self ? nullptr : &result);
  ++t_express_calls;
  return true;
}

std::uint64_t express_calls_on_this_thread() noexcept { return t_express_calls; }
std::uint64_t express_misses_on_this_thread() noexcept { return t_express_misses; }

}  // namespace vdev::backend
