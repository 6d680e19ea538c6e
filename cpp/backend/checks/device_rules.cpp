#include "backend/checks/device_rules.h"

#include <ATen/core/op_registration/adaption.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"
#include "backend/common/vdev_device.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

// Operators whose CUDA kernels check devices themselves (generated: see device_rules.h).
const std::unordered_set<std::string_view>& no_check_operators() {
  static const std::unordered_set<std::string_view> names = {
#include "device_checks.inc"
  };
  return names;
}

// What a NoCheck operator accepts on the CPU in one argument.
enum class CpuTensors : uint8_t {
  Rejected,    // nothing: written arguments (TensorIterator outputs must be on the common device)
  Scalars,     // 0-dim tensors, read as scalars (TensorIterator's CPU scalars)
  OneElement,  // tensors of one element, of any shape (read with .item())
  Accepted,    // any CPU tensor
};

// NoCheck operators' arguments whose CUDA kernels take CPU tensors otherwise than TensorIterator
// does, with the PyTorch source that decides each.
std::optional<CpuTensors> cpu_policy_exception(std::string_view op, std::string_view arg) {
  struct Exception {
    std::string_view op, arg;
    CpuTensors cpu;
  };
  static constexpr Exception kExceptions[] = {
      // Advanced indexing moves CPU index tensors to self's device (TensorAdvancedIndexing.cpp
      // check_indices_on_cpu_or_selfdevice; TensorAdvancedIndexingUtils.h make_info).
      {"aten::index", "indices", CpuTensors::Accepted},
      {"aten::_unsafe_index", "indices", CpuTensors::Accepted},
      {"aten::index_put", "indices", CpuTensors::Accepted},
      {"aten::index_put_", "indices", CpuTensors::Accepted},
      {"aten::_index_put_impl_", "indices", CpuTensors::Accepted},
      {"aten::_unsafe_index_put", "indices", CpuTensors::Accepted},
      // bernoulli_(p: Tensor) moves p to self's device (cuda/DistributionTemplates.h).
      {"aten::bernoulli_", "p", CpuTensors::Accepted},
      // Foreach scalar lists given as a tensor must be on the CPU (ForeachUtils.h
      // convert_tensor_to_scalar_list); mul/div by a tensor read a CPU one with .item()
      // (cuda/ForeachBinaryOpScalarTensor.cu).
      {"aten::_foreach_addcmul", "scalars", CpuTensors::Accepted},
      {"aten::_foreach_addcmul_", "scalars", CpuTensors::Accepted},
      {"aten::_foreach_addcdiv", "scalars", CpuTensors::Accepted},
      {"aten::_foreach_addcdiv_", "scalars", CpuTensors::Accepted},
      {"aten::_foreach_mul", "other", CpuTensors::OneElement},
      {"aten::_foreach_mul_", "other", CpuTensors::OneElement},
      {"aten::_foreach_div", "other", CpuTensors::OneElement},
      {"aten::_foreach_div_", "other", CpuTensors::OneElement},
      {"aten::_foreach_copy_", "src", CpuTensors::Accepted},
      // Fused optimizers read a CPU learning rate with .item() (cuda/FusedAdamKernel.cu).
      {"aten::_fused_adam_", "lr", CpuTensors::OneElement},
      {"aten::_fused_adamw_", "lr", CpuTensors::OneElement},
      {"aten::_fused_sgd_", "lr", CpuTensors::OneElement},
      {"aten::_fused_adagrad_", "lr", CpuTensors::OneElement},
      // Masks and indices of masked_fill_/index_fill_ must be on self's device, 0-dim or not
      // (cuda/Indexing.cu masked_fill__cuda; index_fill_'s TensorIterator allows no CPU scalar).
      {"aten::masked_fill", "mask", CpuTensors::Rejected},
      {"aten::masked_fill_", "mask", CpuTensors::Rejected},
      {"aten::index_fill", "index", CpuTensors::Rejected},
      {"aten::index_fill_", "index", CpuTensors::Rejected},
  };
  for (const Exception& e : kExceptions) {
    if (e.op == op && e.arg == arg) return e.cpu;
  }
  return std::nullopt;
}

}  // namespace

struct CheckedArg {
  std::size_t index;
  std::string name;
  CpuTensors cpu;
};

struct DeviceRule {
  std::size_t nargs = 0;  // the schema's argument count when derived
  bool exact = true;      // torchgen's wrapper check (no device_check: NoCheck)
  std::string method;
  std::vector<CheckedArg> args;  // tensor-like arguments, in the order CUDA checks them
};

namespace {

bool is_tensor_like(const c10::TypePtr& type) {
  return argument_type(type).is(c10::TypeKind::TensorType);
}

std::unique_ptr<DeviceRule> derive_rule(const c10::FunctionSchema& schema) {
  auto rule = std::make_unique<DeviceRule>();
  rule->nargs = schema.arguments().size();
  const std::string& overload = schema.overload_name();
  const std::string base = schema.name().substr(schema.name().find("::") + 2);
  const std::string qualified = overload.empty() ? base : base + "." + overload;
  rule->exact = no_check_operators().count(qualified) == 0;
  rule->method = "wrapper_PrivateUse1_" + overload + "_" + base;
  const auto& args = schema.arguments();
  auto add = [&](std::size_t i) {
    const c10::Argument& a = args[i];
    const CpuTensors usual = is_written(a) ? CpuTensors::Rejected : CpuTensors::Scalars;
    rule->args.push_back(
        {i, a.name(), cpu_policy_exception(schema.name(), a.name()).value_or(usual)});
  };
  if (rule->exact) {
    // torchgen's order: out= arguments, then the positional ones (not the other keyword-only).
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i].is_out() && is_tensor_like(args[i].type())) add(i);
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!args[i].kwarg_only() && is_tensor_like(args[i].type())) add(i);
    }
  } else {
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (is_tensor_like(args[i].type())) add(i);
    }
  }
  return rule;
}

const DeviceRule& rule_for(const c10::OperatorHandle& op) {
  // The schema's address identifies the operator; an operator redefined at the same address (a
  // custom operator's library destroyed and defined again) with another argument count is derived
  // anew.
  const c10::FunctionSchema* key = &op.schema();
  const std::size_t nargs = key->arguments().size();
  thread_local std::unordered_map<const c10::FunctionSchema*, const DeviceRule*> local;
  if (auto it = local.find(key); it != local.end() && it->second->nargs == nargs) {
    return *it->second;
  }
  static std::mutex& mu = []() -> std::mutex& {
    auto* made = new std::mutex;  // leaked: the fork handler may take it until exit
    vdev::rt::register_fork_lock(made, vdev::rt::ForkLockLevel::kOperatorTables);
    return *made;
  }();
  static std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<DeviceRule>> shared;
  static std::vector<std::unique_ptr<DeviceRule>> retired;  // still referenced by other threads
  const DeviceRule* rule = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = shared[key];
    if (slot && slot->nargs != nargs) retired.push_back(std::move(slot));
    if (!slot) slot = derive_rule(*key);
    rule = slot.get();
  }
  local[key] = rule;
  return *rule;
}

[[noreturn]] void two_devices(c10::Device a, c10::Device b) {
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at least two devices, ", a,
              " and ", b, "!");
}

// The tensors of each argument of a call, by schema position: each(i, f) calls f(tensor) for every
// tensor of argument i (the boxed stack's, or the express lane's unboxed arguments).
struct StackArguments {
  const torch::jit::Stack& stack;
  std::size_t first;
  template <class F>
  void each(std::size_t i, F&& f) const {
    for_each_tensor(stack[first + i], f);
  }
};
struct TensorArguments {
  c10::ArrayRef<const at::Tensor*> tensors;
  template <class F>
  void each(std::size_t i, F&& f) const {
    if (i < tensors.size() && tensors[i] != nullptr) f(*tensors[i]);
  }
};

// The TensorIterator-style check of a NoCheck operator: one vdev device, CPU tensors only where
// the argument's policy allows them.
template <class Arguments>
void check_no_check_operator(const DeviceRule& rule, const Arguments& args) {
  std::optional<c10::Device> common;
  for (const CheckedArg& a : rule.args) {
    args.each(a.index, [&](const at::Tensor& t) {
      if (!t.defined() || t.device().type() != kVdev) return;
      if (!common) common = t.device();
      if (t.device() != *common) two_devices(*common, t.device());
    });
  }
  if (!common) return;
  for (const CheckedArg& a : rule.args) {
    args.each(a.index, [&](const at::Tensor& t) {
      if (!t.defined() || t.device().type() == kVdev) return;
      const bool cpu = t.device().is_cpu();
      const bool allowed = (a.cpu == CpuTensors::Accepted && cpu) ||
                           (a.cpu == CpuTensors::Scalars && cpu && t.dim() == 0) ||
                           (a.cpu == CpuTensors::OneElement && cpu && t.numel() == 1);
      if (!allowed) two_devices(*common, t.device());
    });
  }
}

// The rule's check of a call's tensor arguments: torchgen's wrapper check, or a NoCheck
// operator's.
template <class Arguments>
void check_by_rule(const DeviceRule& rule, const Arguments& args) {
  if (rule.exact) {
    std::optional<c10::Device> common;
    for (const CheckedArg& a : rule.args) {
      args.each(a.index, [&](const at::Tensor& t) {
        c10::impl::check_and_update_common_device(common, t, rule.method.c_str(), a.name.c_str());
      });
    }
  } else {
    check_no_check_operator(rule, args);
  }
}

// The vdev device of any argument (tensors of every kind, Device arguments), with vdev tensors on
// two devices an error: the device the operator runs on.
std::optional<c10::Device> vdev_device_of(const c10::OperatorHandle& op,
                                          const torch::jit::Stack& stack, std::size_t first) {
  std::optional<c10::Device> found;
  auto note = [&](c10::Device d) {
    if (d.type() != kVdev) return;
    if (!found) {
      found = d;
    } else if (d.has_index() && found->has_index() && *found != d) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two ",
                  "devices, ", *found, " and ", d, "! (when checking arguments of ",
                  op.schema().operator_name(), ")");
    }
  };
  for (std::size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isDevice()) {
      note(v.toDevice());
    } else {
      for_each_tensor(v, [&](const at::Tensor& t) {
        if (t.defined()) note(t.device());
      });
    }
  }
  return found;
}

}  // namespace

const DeviceRule& device_rule(const c10::OperatorHandle& op) { return rule_for(op); }

std::optional<c10::Device> check_operator_devices(const c10::OperatorHandle& op,
                                                  const torch::jit::Stack& stack) {
  const std::size_t first = stack.size() - op.schema().arguments().size();
  check_by_rule(rule_for(op), StackArguments{stack, first});
  return vdev_device_of(op, stack, first);
}

std::optional<c10::Device> check_operator_devices(const DeviceRule& rule,
                                                  c10::ArrayRef<const at::Tensor*> tensors) {
  check_by_rule(rule, TensorArguments{tensors});
  std::optional<c10::Device> found;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined() || t->device().type() != kVdev) continue;
    if (found && t->device() != *found) two_devices(*found, t->device());
    found = t->device();
  }
  return found;
}

void check_same_device(const char* method,
                       std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors) {
  std::optional<c10::Device> common;
  for (const auto& [name, t] : tensors) {
    c10::impl::check_and_update_common_device(common, *t, method, name);
  }
}

}  // namespace vdev::backend
