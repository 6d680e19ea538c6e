#include "backend/sanitizer/host_operators.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "backend/common/operator_uses.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/memory/host_allocator.h"
#include "backend/sanitizer/findings.h"
#include "backend/sanitizer/settings.h"
#include "backend/sanitizer/stream_sanitizer.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace vdev::backend {
namespace {

std::optional<at::CallbackHandle> g_handle;  // guarded by the settings' mutex

bool pinned_cpu_tensor(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.has_storage() && t.storage().data() != nullptr &&
         is_pinned_ptr(t.storage().data());
}

// Operators that read no tensor data: metadata and views (every tensor they return aliases an
// argument without writing it).
bool reads_no_data(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string_view> kMetadata = {
      "aten::is_pinned",  "aten::is_same_size", "aten::is_set_to",    "aten::size",
      "aten::stride",     "aten::numel",        "aten::dim",          "aten::sym_size",
      "aten::sym_stride", "aten::sym_numel",    "aten::record_stream"};
  if (kMetadata.count(schema.name()) != 0) return true;
  const auto& returns = schema.returns();
  if (returns.empty()) return false;
  for (const c10::Argument& r : returns) {
    if (r.alias_info() == nullptr || r.alias_info()->isWrite()) return false;
  }
  return true;
}

// Operators nested in another one on this thread (a composite's parts, a vdev kernel's host
// work) are the outer call's: only the outermost is checked.
thread_local int t_depth = 0;

void on_operator_end(const at::RecordFunction&, at::ObserverContext*) { --t_depth; }

std::unique_ptr<at::ObserverContext> on_operator(const at::RecordFunction& fn) {
  if (t_depth < 0) t_depth = 0;  // (an end whose start ran before the callback was installed)
  if (t_depth++ != 0) return nullptr;
  if (vdev::rt::on_stream_worker() || !sanitizing_streams() || vdev::rt::in_bad_fork()) {
    return nullptr;
  }
  const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  bool pinned = false;
  for (const c10::IValue& v : inputs) {
    if (any_tensor(v, [](const at::Tensor& t) { return pinned_cpu_tensor(t); })) {
      pinned = true;
      break;
    }
  }
  if (!pinned) return nullptr;
  const std::optional<c10::OperatorName> name = fn.operator_name();
  if (!name) return nullptr;
  const std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp(*name);
  if (!op || !op->hasSchema() || op->schema().arguments().size() != inputs.size() ||
      reads_no_data(op->schema())) {
    return nullptr;
  }
  const torch::jit::Stack stack(inputs.begin(), inputs.end());
  HeldUses found;
  operator_uses(*op, stack, 0, {}, found);
  // Raising is impossible here (see the header): the finding is a warning either way.
  const ForceFindingWarnings warn;
  found.visit([&](c10::ArrayRef<TensorUse> all) {
    std::vector<TensorUse> uses;
    for (const TensorUse& u : all) {
      if (pinned_cpu_tensor(*u.tensor)) uses.push_back(u);
    }
    sanitize_host_access(intern_task_name(op->schema().name()), uses);
  });
  return nullptr;
}

}  // namespace

void watch_host_operators(bool on) {
  if (on && !g_handle) {
    g_handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_operator, &on_operator_end)
                                         .needsInputs(true)
                                         .scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_handle) {
    at::removeCallback(*g_handle);
    g_handle.reset();
  }
}

}  // namespace vdev::backend
