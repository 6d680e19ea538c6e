#include "backend/sanitizer/host_operators.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <memory>
#include <optional>
#include <vector>

#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/memory/host_allocator.h"
#include "backend/sanitizer/findings.h"
#include "backend/sanitizer/operator_uses.h"
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

std::unique_ptr<at::ObserverContext> on_operator(const at::RecordFunction& fn) {
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
  if (!op || !op->hasSchema() || op->schema().arguments().size() != inputs.size()) return nullptr;
  const torch::jit::Stack stack(inputs.begin(), inputs.end());
  std::vector<TensorUse> uses;
  for (TensorUse& u : operator_uses(*op, stack, 0, {})) {
    if (pinned_cpu_tensor(u.tensor)) uses.push_back(std::move(u));
  }
  // Raising is impossible here (see the header): the finding is a warning either way.
  const ForceFindingWarnings warn;
  sanitize_host_access(intern_task_name(op->schema().name()), uses);
  return nullptr;
}

}  // namespace

void watch_host_operators(bool on) {
  if (on && !g_handle) {
    g_handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_operator)
                                         .needsInputs(true)
                                         .scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_handle) {
    at::removeCallback(*g_handle);
    g_handle.reset();
  }
}

}  // namespace vdev::backend
