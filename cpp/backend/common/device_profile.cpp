#include "backend/common/device_profile.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/common/check.h"
#include "runtime/config.h"

namespace vdev::backend {
namespace {

// An aten operator named by a profile must exist and reach the device: a CompositeImplicitAutograd
// operator decomposes above the device's dispatch key, so no device kernel ever sees it (the
// profile must name what it decomposes into). Operators of other namespaces may be registered
// after the profile is read (a library imported later), so they are taken as named.
void check_operator_name(const std::string& name, const vdev::rt::Profile& p) {
  if (name.rfind("aten::", 0) != 0) return;
  const std::size_t dot = name.find('.');
  const std::string base = name.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  bool found = false;
  bool decomposes = true;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    if (op.name != base || (dot != std::string::npos && op.overload_name != overload)) continue;
    found = true;
    const auto handle = c10::Dispatcher::singleton().findOp(op);
    if (handle && !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
      decomposes = false;
    }
  }
  TORCH_CHECK(found, "[config] VDEV_PROFILE=", p.id, ": \"missing_operators\" names '", name,
              "', which is not an aten operator");
  TORCH_CHECK(!decomposes, "[config] VDEV_PROFILE=", p.id, ": \"missing_operators\" names '", name,
              "', which decomposes into other operators before it reaches a device "
              "(CompositeImplicitAutograd): name the operators it decomposes into");
}

}  // namespace

DeviceProfile::DeviceProfile() : profile_(&VDEV_RT(vdev::rt::config()).profile) {
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

bool DeviceProfile::lacks(std::string_view name, std::string_view overload) const {
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
