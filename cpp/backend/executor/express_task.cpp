#include "backend/executor/express_task.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/Tensor.h>
#include <c10/util/complex.h>

#include <utility>
#include <vector>

#include "backend/common/tensor_args.h"
#include "backend/executor/operator_task.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

// A Python number's value, read from its wrapped tensor (no dispatch: Tensor.item() would be an
// operator call); None for a dtype Python numbers do not have.
c10::IValue number_value(const at::Tensor& t) {
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case c10::ScalarType::Double:
      return *static_cast<const double*>(p);
    case c10::ScalarType::Long:
      return *static_cast<const int64_t*>(p);
    case c10::ScalarType::ComplexDouble:
      return *static_cast<const c10::complex<double>*>(p);
    case c10::ScalarType::Bool:
      return *static_cast<const bool*>(p);
    default:
      return {};
  }
}

void* address_of(const at::Tensor& t) { return vdev::rt::kernel_address(t.data_ptr()); }

}  // namespace

std::shared_ptr<const ExpressSignature> ExpressSignature::make(
    const c10::OperatorHandle& op, std::shared_ptr<const LaunchPlan> plan,
    c10::ArrayRef<UnboxedArg> args, std::uint32_t coefficient_args, bool in_place) {
  if (args.size() > kMaxArgs) return nullptr;
  auto sig = std::make_shared<ExpressSignature>(op, std::move(plan));
  for (std::size_t i = 0; i < args.size(); ++i) {
    Arg& a = sig->args.emplace_back();
    if (const at::Tensor* t = args[i].tensor) {
      if (is_vdev_tensor(*t)) {
        a.kind = Kind::kDeviceTensor;
        a.spec.set(*t);
        a.spec.data = nullptr;  // per call
      } else {
        if (number_value(*t).isNone()) return nullptr;
        a.kind = Kind::kNumber;
      }
    } else if ((coefficient_args >> i) & 1U) {
      a.kind = Kind::kCoefficient;
    } else {
      // Baked into the signature: only values the key encodes exactly. A tensor inside a value
      // (an optional tensor, a list) is keyed by its metadata only: such calls are declined.
      const c10::IValue& v = args[i].value;
      if (v.isTensor() || v.isList() || v.isTuple() || v.isObject()) return nullptr;
      a.kind = Kind::kValue;
      a.value = v;
    }
  }
  if (!in_place) {
    const MetaTensor& m = sig->plan->returns[0].tensors[0];  // a fresh output (fresh_output)
    AliasSpec& out = sig->output.emplace();
    out.sizes.assign(m.sizes.begin(), m.sizes.end());
    out.strides.assign(m.strides.begin(), m.strides.end());
    out.dtype = m.dtype;
  }
  return sig;
}

ExpressTask::ExpressTask(std::shared_ptr<const ExpressSignature> sig,
                         c10::ArrayRef<UnboxedArg> args, const at::Tensor* fresh_output)
    : sig_(std::move(sig)) {
  const auto& sig_args = sig_->args;
  for (std::size_t i = 0; i < sig_args.size(); ++i) {
    switch (sig_args[i].kind) {
      case ExpressSignature::Kind::kDeviceTensor:
        addresses_[i] = address_of(*args[i].tensor);
        break;
      case ExpressSignature::Kind::kNumber:
        values_[i] = number_value(*args[i].tensor);
        break;
      case ExpressSignature::Kind::kCoefficient:
        values_[i] = args[i].value;
        break;
      case ExpressSignature::Kind::kValue:
        break;
    }
  }
  if (fresh_output != nullptr) output_address_ = address_of(*fresh_output);
}

void ExpressTask::operator()() const {
  const ExpressSignature& sig = *sig_;
  const auto& sig_args = sig.args;
  torch::jit::Stack made;
  made.reserve(sig_args.size());
  for (std::size_t i = 0; i < sig_args.size(); ++i) {
    const ExpressSignature::Arg& a = sig_args[i];
    switch (a.kind) {
      case ExpressSignature::Kind::kDeviceTensor: {
        // The same view passed twice is one CPU tensor, as on CPU (cpu_alias.h's place_aliases).
        std::size_t same = i;
        for (std::size_t e = 0; e < i && same == i; ++e) {
          if (sig_args[e].kind == ExpressSignature::Kind::kDeviceTensor &&
              addresses_[e] == addresses_[i] && sig_args[e].spec.same_layout(a.spec)) {
            same = e;
          }
        }
        made.push_back(same == i ? c10::IValue(a.spec.make_at(addresses_[i])) : made[same]);
        break;
      }
      case ExpressSignature::Kind::kNumber:
        made.emplace_back(at::native::wrapped_scalar_tensor(values_[i].toScalar()));
        break;
      case ExpressSignature::Kind::kCoefficient:
        made.push_back(values_[i]);
        break;
      case ExpressSignature::Kind::kValue:
        made.push_back(a.value);
        break;
    }
  }
  const LaunchPlan& plan = *sig.plan;
  if (!sig.output) {
    run_mutating(sig.op, plan, made);
    return;
  }
  const std::vector<c10::IValue> outputs{sig.output->make_at(output_address_)};
  const bool use_out_op =
      plan.out_op.has_value() && !plan.out_refused.load(std::memory_order_relaxed);
  run_fresh(sig.op, plan, made, outputs, use_out_op);
}

}  // namespace vdev::backend
