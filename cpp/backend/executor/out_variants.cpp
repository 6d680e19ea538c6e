#include "backend/executor/out_variants.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include "runtime/process.h"

namespace vdev::backend {
namespace {

bool is_out_variant(const c10::FunctionSchema& f, const c10::FunctionSchema& o) {
  const auto& fa = f.arguments();
  const auto& oa = o.arguments();
  if (o.name() != f.name() || oa.size() != fa.size() + f.returns().size()) return false;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].name() != oa[i].name() || *fa[i].type() != *oa[i].type()) return false;
  }
  for (std::size_t i = fa.size(); i < oa.size(); ++i) {
    const c10::AliasInfo* alias = oa[i].alias_info();
    if (alias == nullptr || !alias->isWrite() ||
        oa[i].type()->kind() != c10::TypeKind::TensorType) {
      return false;
    }
  }
  return true;
}

// Whether the out= overload `o` of `f` would lose what f writes into its other arguments: f
// mutates an argument it does not return (_fused_moving_avg_obs_fq_helper's running_min, scale,
// ...) and o has no CPU kernel, only ATen's generated composite, which runs the functional form
// and copies the returns alone (CPU's own out= call loses the mutation too). f itself, run on
// aliases, writes them.
bool loses_mutations(const c10::FunctionSchema& f, const c10::OperatorHandle& o) {
  for (const c10::Argument& a : f.arguments()) {
    const c10::AliasInfo* alias = a.alias_info();
    if (alias != nullptr && alias->isWrite()) {
      return !o.hasKernelForDispatchKey(c10::DispatchKey::CPU);
    }
  }
  return false;
}

struct Cache {
  std::mutex mu;
  bool indexed = false;
  std::unordered_map<std::string, std::vector<c10::OperatorName>> overloads;  // by op name
  std::unordered_map<c10::OperatorName, std::optional<c10::OperatorHandle>> found;

  void index() {
    if (indexed) return;
    for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
      overloads[n.name].push_back(n);
    }
    indexed = true;
  }
};

Cache& cache() {
  // Leaked: used by stream workers until exit.
  static Cache* c =
      vdev::rt::new_leaked_with_fork_lock<Cache>(vdev::rt::ForkLockLevel::kOperatorTables);
  return *c;
}

struct Refused {
  std::mutex mu;
  // Known in advance, so that the first call does not find out by failing: these losses' out=
  // kernels, given a reduction, first size their output to the elementwise shape (their meta
  // functions build a TensorIterator over it, Loss.cpp), printing PyTorch's "output ... was
  // resized" warning, on CPU too; the functional call CPU makes never warns.
  std::unordered_set<c10::OperatorName> names{
      c10::OperatorName("aten::mse_loss", "out"), c10::OperatorName("aten::smooth_l1_loss", "out"),
      c10::OperatorName("aten::huber_loss", "out"),
      c10::OperatorName("aten::binary_cross_entropy", "out")};
};

Refused& refused() {
  // Leaked: used by stream workers until exit.
  static Refused* r =
      vdev::rt::new_leaked_with_fork_lock<Refused>(vdev::rt::ForkLockLevel::kOperatorTables);
  return *r;
}

}  // namespace

std::optional<c10::OperatorHandle> out_variant_of(const c10::OperatorHandle& op) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  const c10::OperatorName& name = op.operator_name();
  auto hit = c.found.find(name);
  if (hit != c.found.end()) return hit->second;
  c.index();
  std::optional<c10::OperatorHandle> result;
  auto it = c.overloads.find(name.name);
  if (it != c.overloads.end()) {
    for (const c10::OperatorName& candidate : it->second) {
      auto handle = c10::Dispatcher::singleton().findSchema(candidate);
      if (handle && handle->hasSchema() && is_out_variant(op.schema(), handle->schema()) &&
          !loses_mutations(op.schema(), *handle)) {
        result = handle;
        break;
      }
    }
  }
  c.found.emplace(name, result);
  return result;
}

std::optional<EquivalentOut> equivalent_out_kernel(const c10::OperatorHandle& op,
                                                   const torch::jit::Stack& stack,
                                                   std::size_t first) {
  const c10::OperatorName& name = op.operator_name();
  if (name.name != "aten::relu" || !name.overload_name.empty()) return std::nullopt;
  if (!stack[first].isTensor() || stack[first].toTensor().scalar_type() == at::kBool) {
    return std::nullopt;
  }
  static const std::optional<c10::OperatorHandle> clamp_min_out =
      c10::Dispatcher::singleton().findSchema({"aten::clamp_min", "out"});
  if (!clamp_min_out) return std::nullopt;
  return EquivalentOut{*clamp_min_out, {c10::IValue(c10::Scalar(0))}};
}

bool out_overload_refused(const c10::Error& e) {
  const std::string msg = e.what_without_backtrace();
  return msg.find("not resizable") != std::string::npos ||
         msg.find("Expected out tensor to have dtype") != std::string::npos;
}

void remember_refused_out_overload(const c10::OperatorHandle& out_overload) {
  std::lock_guard<std::mutex> lock(refused().mu);
  refused().names.insert(out_overload.operator_name());
}

bool is_refused_out_overload(const c10::OperatorHandle& out_overload) {
  std::lock_guard<std::mutex> lock(refused().mu);
  return refused().names.count(out_overload.operator_name()) != 0;
}

}  // namespace vdev::backend
