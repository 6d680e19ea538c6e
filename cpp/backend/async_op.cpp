#include "backend/async_op.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/alias.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/check.h"
#include "backend/cpu_view.h"
#include "backend/guard.h"
#include "backend/meta_cache.h"
#include "backend/out_variants.h"
#include "backend/task.h"
#include "backend/tensor_ops.h"

namespace vdev::backend {
namespace {

constexpr auto kVdev = c10::DeviceType::PrivateUse1;

bool is_vdev(const at::Tensor& t) { return t.defined() && t.device().type() == kVdev; }

c10::TypeKind base_kind(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->expectRef<c10::OptionalType>().getElementType()->kind();
  }
  return type->kind();
}

bool is_tensor_list_type(const c10::TypePtr& type) {
  const c10::TypePtr t = type->kind() == c10::TypeKind::OptionalType
                             ? type->expectRef<c10::OptionalType>().getElementType()
                             : type;
  if (t->kind() != c10::TypeKind::ListType) return false;
  return base_kind(t->expectRef<c10::ListType>().getElementType()) == c10::TypeKind::TensorType;
}

// Operators whose meta kernel disagrees with their CPU kernel on output shapes (found by the
// OpInfo sweep, tests/test_opinfo.py): they run synchronously. Batch norm disagrees only in
// evaluation mode (CPU returns empty save_mean/save_invstd, the meta kernel [C]) and for half and
// bfloat16 inputs (CPU keeps the saved statistics in the input dtype, the meta kernel in float);
// float32/float64 training, the path every training step takes, agrees and is queued.
bool meta_disagrees_with_cpu(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                             std::size_t first) {
  static const std::unordered_set<std::string> always = {
      "aten::_native_batch_norm_legit_no_training",
      "aten::_batch_norm_no_update",
      "aten::_embedding_bag",
      "aten::_embedding_bag_forward_only",
  };
  static const std::unordered_set<std::string> training_only = {
      "aten::native_batch_norm",
      "aten::_native_batch_norm_legit",
      "aten::_batch_norm_with_update",  // always training (no `training` argument)
  };
  if (always.count(schema.name()) != 0) return true;
  if (training_only.count(schema.name()) == 0) return false;
  const c10::IValue& input = stack[first];
  if (!input.isTensor() || c10::isReducedFloatingType(input.toTensor().scalar_type())) return true;
  const std::optional<int> training = schema.argumentIndexWithName("training");
  if (!training) return false;
  const c10::IValue& v = stack[first + static_cast<std::size_t>(*training)];
  return !(v.isBool() && v.toBool());
}

// Decides, before any side effect, whether the schema and arguments allow asynchronous execution.
bool eligible(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
              std::size_t first) {
  if (meta_disagrees_with_cpu(schema, stack, first)) return false;
  for (const c10::Argument& ret : schema.returns()) {
    const bool tensorish =
        base_kind(ret.type()) == c10::TypeKind::TensorType || is_tensor_list_type(ret.type());
    if (!tensorish) return false;  // bool / Scalar / int results need values on the host
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) return false;  // a view
  }
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::TypeKind k = base_kind(args[i].type());
    if (k == c10::TypeKind::GeneratorType || k == c10::TypeKind::DeviceObjType) return false;
    const c10::IValue& v = stack[first + i];
    const bool mutated = args[i].alias_info() != nullptr && args[i].alias_info()->isWrite();
    auto ok = [&](const at::Tensor& t) {
      if (!t.defined() || is_vdev(t)) return true;
      return t.device().is_cpu() && !mutated;  // a CPU tensor is snapshotted: it must be read-only
    };
    if (v.isTensor()) {
      if (!ok(v.toTensor())) return false;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (!ok(t)) return false;
      }
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> o = t;
        if (o && !ok(*o)) return false;
      }
    }
  }
  return true;
}

// Maps every tensor inside an IValue (tensor, tensor list, optional tensor list).
template <typename F>
c10::IValue map_tensors(const c10::IValue& v, F f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(f(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const auto& t : v.toOptionalTensorList()) {
      const std::optional<at::Tensor> o = t;
      out.push_back(o ? std::optional<at::Tensor>(f(*o)) : std::nullopt);
    }
    return out;
  }
  return v;
}

at::Tensor to_meta(const at::Tensor& t) {
  if (!is_vdev(t)) return t;  // CPU scalars stay on the CPU: meta kernels accept them
  at::Tensor m = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  if (t.is_conj()) m._set_conj(true);
  if (t.is_neg()) m._set_neg(true);
  return m;
}

at::Tensor fresh_output(const MetaTensor& m, c10::Device device) {
  if (!m.defined) return at::Tensor();
  return at::empty_strided(m.sizes, m.strides, at::TensorOptions().dtype(m.dtype).device(device));
}

MetaTensor describe(const at::Tensor& t) {
  MetaTensor m;
  if (!t.defined()) return m;
  m.defined = true;
  m.sizes = t.sizes().vec();
  m.strides = t.strides().vec();
  m.dtype = t.scalar_type();
  return m;
}

// Runs the operator on meta versions of its arguments and records its outputs' metadata in
// `result` (result.ok: whether it worked and returned only tensors, tensor lists and None).
void run_meta(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
              std::size_t nargs, MetaResult& result) {
  torch::jit::Stack meta_stack;
  meta_stack.reserve(nargs);
  for (std::size_t i = first; i < first + nargs; ++i) {
    meta_stack.push_back(map_tensors(stack[i], to_meta));
  }
  try {
    op.callBoxed(&meta_stack);
  } catch (const std::exception&) {
    return;  // ok = false
  }
  for (const c10::IValue& v : meta_stack) {
    MetaReturn r;
    if (v.isNone()) {
      r.kind = MetaReturn::None;
    } else if (v.isTensor()) {
      r.kind = MetaReturn::Tensor;
      r.tensors.push_back(describe(v.toTensor()));
    } else if (v.isTensorList()) {
      r.kind = MetaReturn::TensorList;
      for (const at::Tensor& t : v.toTensorVector()) r.tensors.push_back(describe(t));
    } else {
      result.returns.clear();
      return;  // a non-tensor result: not asynchronously
    }
    result.returns.push_back(std::move(r));
  }
  result.ok = true;
}

// The argument index whose alias set a mutable return shares (in-place and out= operators).
std::optional<std::size_t> aliased_argument(const c10::FunctionSchema& s, const c10::Argument& r) {
  if (r.alias_info() == nullptr) return std::nullopt;
  const auto& args = s.arguments();
  for (std::size_t j = 0; j < args.size(); ++j) {
    const c10::AliasInfo* a = args[j].alias_info();
    if (a != nullptr && a->isWrite() && a->beforeSets() == r.alias_info()->beforeSets()) return j;
  }
  return std::nullopt;
}

// out= overloads that refused the outputs they were given (out_variant_refused), for plans made
// later (plans made earlier carry their own flag, MetaResult::out_refused).
struct UnsafeOutOverloads {
  std::mutex mu;
  std::unordered_set<c10::OperatorName> names;
};
UnsafeOutOverloads& unsafe_out_overloads() {
  static UnsafeOutOverloads* u = new UnsafeOutOverloads;  // leaked: used by stream workers
  return *u;
}
bool is_unsafe_out(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(unsafe_out_overloads().mu);
  return unsafe_out_overloads().names.count(op.operator_name()) != 0;
}
void mark_unsafe_out(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(unsafe_out_overloads().mu);
  unsafe_out_overloads().names.insert(op.operator_name());
}

// An out= kernel that cannot write into the outputs the meta kernel described: it resizes them to
// an intermediate shape (mse_loss.out with a reduction), or insists on other dtypes than the meta
// kernel gave (native_layer_norm.out for bfloat16: CPU keeps mean/rstd in bfloat16, the meta
// kernel says float, as CUDA does). The functional form plus a copy is used for it from then on.
bool out_variant_refused(const c10::Error& e) {
  const std::string msg = e.what_without_backtrace();
  return msg.find("not resizable") != std::string::npos ||
         msg.find("Expected out tensor to have dtype") != std::string::npos;
}

void copy_result(at::Tensor dst, const at::Tensor& src) {
  TORCH_CHECK(dst.sizes() == src.sizes(), "the meta kernel predicted an output of shape ",
              dst.sizes(), " but the CPU kernel produced ", src.sizes());
  dst.copy_(src);
}

// Copies every tensor of `src` into the matching tensor of `dst` (fresh-output aliases).
void copy_results(const std::vector<c10::IValue>& dst, const torch::jit::Stack& src) {
  for (std::size_t i = 0; i < dst.size(); ++i) {
    if (dst[i].isTensor() && dst[i].toTensor().defined()) {
      copy_result(dst[i].toTensor(), src[i].toTensor());
    } else if (dst[i].isTensorList()) {
      const auto ds = dst[i].toTensorVector();
      const auto ss = src[i].toTensorVector();
      TORCH_CHECK(ds.size() == ss.size(), "the meta kernel predicted ", ds.size(),
                  " outputs but the CPU kernel produced ", ss.size());
      for (std::size_t k = 0; k < ds.size(); ++k) copy_result(ds[k], ss[k]);
    }
  }
}

struct Launch {
  c10::OperatorHandle op;                  // as called: functional, in-place or out=
  std::shared_ptr<const MetaResult> plan;  // out_op, out_args, out_refused
  bool use_out_op = false;                 // all outputs fresh and plan->out_op usable
  // The arguments: snapshots of CPU tensors and other values; vdev tensors are made into CPU
  // aliases on the worker from arg_specs (position, spec), or, inside tensor lists, on the host.
  torch::jit::Stack args;
  c10::SmallVector<std::pair<std::size_t, AliasSpec>, 3> arg_specs;
  // Fresh outputs: single tensors as specs (aliases made on the worker), other returns (tensor
  // lists, None) as host-made IValues in `host_outputs` at the same positions.
  bool fresh_outputs = false;
  c10::SmallVector<std::optional<AliasSpec>, 2> output_specs;
  std::vector<c10::IValue> host_outputs;

  void operator()() {
    try {
      run();
    } catch (const c10::Error& e) {
      // The stream names the operator; keep the message, not the C++ backtrace.
      throw std::runtime_error(e.what_without_backtrace());
    }
  }

  void run() {
    const torch::jit::Stack made = make_args();
    torch::jit::Stack stack = made;
    if (!fresh_outputs) {  // in-place / out=: writes through the argument aliases
      run_mutating(made, stack);
      return;
    }
    std::vector<c10::IValue> outputs =
        host_outputs.empty() ? std::vector<c10::IValue>(output_specs.size()) : host_outputs;
    for (std::size_t i = 0; i < output_specs.size(); ++i) {
      if (output_specs[i]) outputs[i] = output_specs[i]->make();
    }
    if (use_out_op) {
      // Separate alias objects: an out= kernel may resize them before failing, and `outputs` must
      // keep the device allocations' metadata for the fallback below.
      for (const auto& o : outputs) stack.push_back(at::alias(o.toTensor()));
      try {
        plan->out_op->callBoxed(&stack);
        return;
      } catch (const c10::Error& e) {
        if (!out_variant_refused(e)) throw;
        refuse(*plan->out_op);  // use the functional form from now on
      }
      stack = made;
    }
    op.callBoxed(&stack);
    copy_results(outputs, stack);
  }

  void refuse(const c10::OperatorHandle& out_overload) const {
    plan->out_refused.store(true, std::memory_order_relaxed);
    mark_unsafe_out(out_overload);
  }

  torch::jit::Stack make_args() const {
    torch::jit::Stack stack = args;
    for (const auto& [i, spec] : arg_specs) stack[i] = spec.make();
    return stack;
  }

  // Some out= kernels refuse fixed device aliases as outputs (out_variant_refused: mse_loss.out
  // with a reduction resizes them to an intermediate shape): they get resizable CPU temporaries,
  // copied into the device outputs afterwards.
  void run_mutating(const torch::jit::Stack& made, torch::jit::Stack& stack) {
    const std::vector<std::size_t>& out_args = plan->out_args;
    if (!out_args.empty() && !plan->out_refused.load(std::memory_order_relaxed)) {
      for (std::size_t j : out_args) stack[j] = at::alias(made[j].toTensor());  // own metadata
      try {
        op.callBoxed(&stack);
        return;
      } catch (const c10::Error& e) {
        if (!out_variant_refused(e)) throw;
        refuse(op);
      }
      stack = made;
    } else if (out_args.empty()) {
      op.callBoxed(&stack);
      return;
    }
    std::vector<at::Tensor> temps;
    for (std::size_t j : out_args) {
      temps.push_back(at::empty_like(made[j].toTensor()));
      stack[j] = temps.back();
    }
    op.callBoxed(&stack);
    for (std::size_t k = 0; k < out_args.size(); ++k) {
      copy_result(made[out_args[k]].toTensor(), temps[k]);
    }
  }
};

// Builds the plan for an operator and argument signature seen for the first time: eligibility,
// output metadata from the meta kernel, and what the schema says about each return.
std::shared_ptr<const MetaResult> make_plan(const c10::OperatorHandle& op,
                                            const torch::jit::Stack& stack, std::size_t first,
                                            std::size_t nargs) {
  const c10::FunctionSchema& schema = op.schema();
  auto plan = std::make_shared<MetaResult>();
  if (!eligible(schema, stack, first)) return plan;  // ok = false
  run_meta(op, stack, first, nargs, *plan);
  const auto& rets = schema.returns();
  if (!plan->ok || plan->returns.size() != rets.size()) {
    plan->ok = false;
    return plan;
  }
  std::size_t n_aliased = 0;
  for (const auto& r : rets) {
    const std::optional<std::size_t> j = aliased_argument(schema, r);
    plan->aliased.push_back(j ? static_cast<int>(*j) : -1);
    n_aliased += j ? 1 : 0;
  }
  if (n_aliased != 0 && n_aliased != rets.size()) {
    plan->ok = false;  // mixed fresh and mutated returns
    return plan;
  }
  plan->all_fresh = n_aliased == 0;
  if (plan->all_fresh && !rets.empty()) {
    bool single_tensors = true;
    for (const MetaReturn& m : plan->returns) {
      single_tensors &= m.kind == MetaReturn::Tensor && m.tensors[0].defined;
    }
    if (single_tensors) plan->out_op = out_variant_of(op);
    if (plan->out_op && is_unsafe_out(*plan->out_op)) plan->out_op.reset();
  } else {
    const auto& sargs = schema.arguments();
    for (std::size_t j = 0; j < sargs.size(); ++j) {
      const c10::AliasInfo* a = sargs[j].alias_info();
      if (a != nullptr && a->isWrite() && sargs[j].kwarg_only() && stack[first + j].isTensor()) {
        plan->out_args.push_back(j);
      }
    }
    if (!plan->out_args.empty() && is_unsafe_out(op)) plan->out_refused.store(true);
  }
  return plan;
}

}  // namespace

bool try_enqueue_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;

  // 1. The plan: cached by signature (the key is built in a reused buffer), else made now. A plan
  // that says "not asynchronously" is cached as such.
  thread_local std::string key;
  std::shared_ptr<const MetaResult> plan;
  const bool keyed = meta_cache_key(key, schema, *stack, first, nargs);
  if (keyed) plan = meta_cache_find(key);
  if (!plan) {
    std::string miss_key = keyed ? key : std::string();  // the meta call may reenter
    plan = make_plan(op, *stack, first, nargs);
    if (keyed) meta_cache_store(miss_key, plan);
  }
  if (!plan->ok) return false;
  const auto& rets = schema.returns();

  // 2. Outputs on the device: the mutated argument itself, or freshly allocated.
  const c10::DeviceGuard guard(device);
  std::vector<c10::IValue> outputs;
  outputs.reserve(rets.size());
  for (std::size_t i = 0; i < rets.size(); ++i) {
    const MetaReturn& m = plan->returns[i];
    if (plan->aliased[i] >= 0) {
      c10::IValue real = (*stack)[first + static_cast<std::size_t>(plan->aliased[i])];
      if (real.isTensor() && m.kind == MetaReturn::Tensor && m.tensors[0].defined &&
          real.toTensor().sizes() != c10::IntArrayRef(m.tensors[0].sizes)) {
        vdev_resize_(real.toTensor(), c10::fromIntArrayRefSlow(m.tensors[0].sizes),
                     std::nullopt);  // out= resized by the operator
      }
      outputs.push_back(real);
    } else if (m.kind == MetaReturn::None) {
      outputs.emplace_back();
    } else if (m.kind == MetaReturn::Tensor) {
      outputs.emplace_back(fresh_output(m.tensors[0], device));
    } else {
      c10::List<at::Tensor> list;
      for (const MetaTensor& t : m.tensors) list.push_back(fresh_output(t, device));
      outputs.emplace_back(list);
    }
  }

  // 3. The task: specs of device tensors (aliased on the worker), snapshots of CPU tensors. Device
  // memory needs no reference: the allocator orders its reuse by streams.
  Launch launch{op, plan};
  auto alias = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (is_vdev(t)) return cpu_alias(t);
    return t.clone();
  };
  launch.args.reserve(nargs);
  for (std::size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor() && is_vdev(v.toTensor())) {
      launch.arg_specs.emplace_back(i - first, AliasSpec::of(v.toTensor()));
      launch.args.emplace_back();  // placeholder
    } else {
      launch.args.push_back(map_tensors(v, alias));
    }
  }
  if (plan->all_fresh && !rets.empty()) {
    launch.fresh_outputs = true;
    launch.use_out_op =
        plan->out_op.has_value() && !plan->out_refused.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const c10::IValue& o = outputs[i];
      if (o.isTensor() && is_vdev(o.toTensor())) {
        launch.output_specs.emplace_back(AliasSpec::of(o.toTensor()));
      } else {
        launch.output_specs.emplace_back();
        launch.host_outputs.resize(outputs.size());  // only when some return needs it
        launch.host_outputs[i] = map_tensors(o, alias);
      }
    }
  }

  vdev::rt::Stream& stream = current_runtime_stream(device.index());
  enqueue_task(stream, schema.name().c_str(), std::move(launch));

  torch::jit::drop(*stack, nargs);
  for (auto& o : outputs) stack->push_back(std::move(o));
  return true;
}

}  // namespace vdev::backend
