#include "backend/common/device_capability.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include "backend/common/error_boundary.h"
#include "runtime/config.h"

namespace vdev::backend {
namespace {

// Where a call of `op` on vdev tensors goes: vdev's boxed kernel (ops/fallback.cpp, the only
// path that runs check_call and so the profile's check), a composite kernel (torch runs it as
// other operators, CompositeImplicitAutograd before any device kernel sees the call,
// CompositeExplicitAutograd as one kernel shared by every device), or a kernel of vdev's own
// (ops/copy.cpp, ...).
enum class Route { kBoxedKernel, kOwnKernel, kComposite };  // best first

struct CheckedKernels {
  std::mutex mu;
  std::unordered_set<std::string> names;
};
CheckedKernels& checked_kernels() {
  static auto* kernels = new CheckedKernels;  // leaked: noted at static initialisation
  return *kernels;
}

Route route_of(const c10::OperatorHandle& op) {
  using c10::DispatchKey;
  if (!op.hasComputedKernelForDispatchKey(DispatchKey::PrivateUse1)) return Route::kComposite;
  if (op.hasKernelForDispatchKey(DispatchKey::PrivateUse1)) {  // a kernel registered for vdev
    const c10::OperatorName& n = op.operator_name();
    std::string name = n.name.substr(n.name.find("::") + 2);
    if (!n.overload_name.empty()) name += "." + n.overload_name;
    CheckedKernels& checked = checked_kernels();
    const std::lock_guard<std::mutex> lock(checked.mu);
    return checked.names.count(name) != 0 ? Route::kBoxedKernel : Route::kOwnKernel;
  }
  // No kernel of vdev's for it: torch's composite kernel for every device wins over a backend's
  // fallback (the dispatcher's order), else vdev's boxed fallback runs it.
  for (const DispatchKey k :
       {DispatchKey::CompositeExplicitAutogradNonFunctional, DispatchKey::CompositeExplicitAutograd,
        DispatchKey::CompositeImplicitAutograd}) {
    if (op.hasKernelForDispatchKey(k)) return Route::kComposite;
  }
  return Route::kBoxedKernel;
}

// An aten operator a profile names must reach the check (an operator of another namespace may be
// registered after the profile is read, by a library imported later: it is taken as named). A
// name without overload covers every overload, and must reach the check through one of them.
void check_operator_name(const std::string& name, const vdev::rt::CapabilityProfile& p) {
  if (name.rfind("aten::", 0) != 0) return;
  const std::size_t dot = name.find('.');
  const std::string base = name.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  std::optional<Route> route;  // of the named overload, else the best of them
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    if (op.name != base || (dot != std::string::npos && op.overload_name != overload)) continue;
    const std::optional<c10::OperatorHandle> handle = c10::Dispatcher::singleton().findOp(op);
    if (!handle) continue;
    const Route r = route_of(*handle);
    if (!route || r < *route) route = r;
  }
  // copy_ is torch's kernel for every backend, which hands any copy with a vdev side to
  // _copy_from (aten/src/ATen/native/Copy.cpp: PrivateUse1 is not among the devices copy_ runs
  // itself), and vdev's _copy_from is a kernel of its own (ops/copy.cpp). So "name the operators
  // it runs" would be no way out: no copy reaches the check, and a device that lacked copies
  // could not receive a tensor.
  const bool copy =
      base == "aten::copy_" || base == "aten::_copy_from" || base == "aten::_copy_from_and_resize";
  const char* what =
      copy
          ? "which vdev cannot mark missing: every copy to, from or on the device (copy_, .to(), "
            ".cpu()) goes through torch's copy_ kernel, shared by every device, to "
            "aten::_copy_from, which vdev runs with a kernel of its own (cpp/backend/ops/copy.cpp) "
            "outside the check of a profile's missing operators; a device without copies could "
            "hold no data"
      : !route ? "which is not an aten operator"
      : *route == Route::kComposite
          ? "which decomposes into other operators before any kernel of vdev's sees the call (a "
            "composite kernel of torch's, shared by every device): name the operators it runs"
      : *route == Route::kOwnKernel
          ? "which vdev runs with a kernel of its own (cpp/backend/ops/), outside "
            "the checks a profile's missing operators are refused by"
          : nullptr;
  TORCH_CHECK(what == nullptr, "[config] VDEV_PROFILE='", p.id, "': \"missing_operators\" names '",
              name, "', ", what);
}

}  // namespace

void note_checked_kernel(const std::string& name) {
  CheckedKernels& checked = checked_kernels();
  const std::lock_guard<std::mutex> lock(checked.mu);
  checked.names.insert(name);
}

DeviceCapability::DeviceCapability() : profile_(&VDEV_RT(vdev::rt::config()).profile) {
  const std::vector<std::string>& unsupported = profile_->unsupported_dtypes;
  std::size_t mapped = 0;
  for (std::size_t i = 0; i < refused_.size(); ++i) {
    const std::string name = torch_dtype_name(static_cast<c10::ScalarType>(i));
    if (std::find(unsupported.begin(), unsupported.end(), name) != unsupported.end()) {
      refused_[i] = true;
      ++mapped;
    }
  }
  TORCH_INTERNAL_ASSERT(mapped == unsupported.size(), "a profile dtype name c10 does not know");
  refuses_dtypes_ = mapped > 0;
  for (const std::string& name : profile_->missing_operators) {
    check_operator_name(name, *profile_);
    missing_.insert(name);
  }
  lacks_operators_ = !missing_.empty();
}

bool DeviceCapability::lacks(std::string_view name, std::string_view overload) const {
  std::string key(name);
  if (missing_.count(key)) return true;
  if (overload.empty()) return false;
  key += '.';
  key += overload;
  return missing_.count(key) > 0;
}

std::string torch_dtype_name(c10::ScalarType t) {
  try {
    return std::string(c10::getDtypeNames(t).first);
  } catch (const c10::Error&) {  // a scalar type without a torch dtype (Undefined, ...)
    return "";
  }
}

}  // namespace vdev::backend
