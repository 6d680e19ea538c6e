// The capability profile (VDEV_PROFILE, runtime/capability_profile.h) as the backend sees it: the
// scalar types the device cannot hold and the operators it lacks, in c10's terms. The checks made
// at the call consult it (checks/capability_rules.h), and so does the device guard's capability
// (torch.accelerator.get_device_capability's supported dtypes).
//
// Built on first use from the runtime's configuration, which it raises the error of if it is
// malformed; the default profile refuses nothing, so `refuses_dtypes()` and `lacks_operators()`
// are false and no check costs more than that one branch.
//
// Thread rules: immutable once built (a function-local static); any thread.
#pragma once

#include <c10/core/ScalarType.h>

#include <array>
#include <string>
#include <string_view>
#include <unordered_set>

#include "backend/common/export.h"
#include "runtime/capability_profile.h"

namespace vdev::backend {

class VDEV_BACKEND_API DeviceCapability {
 public:
  const vdev::rt::CapabilityProfile& description() const { return *profile_; }
  bool refuses_dtypes() const { return refuses_dtypes_; }
  bool lacks_operators() const { return lacks_operators_; }
  bool refuses(c10::ScalarType t) const { return refused_[static_cast<std::size_t>(t)]; }
  // Whether `name` ("aten::cumsum") or its overload (`overload`, may be empty) is lacking.
  bool lacks(std::string_view name, std::string_view overload) const;

  // Built from the configuration on the first call; raises the configuration's error, or a
  // RuntimeError naming VDEV_PROFILE and a lacking aten operator the check at the call would never
  // see: one that does not exist, one that decomposes before it reaches a device (a composite
  // kernel), or one vdev runs with a kernel of its own instead of the boxed kernel.
  static const DeviceCapability& get() {
    static const DeviceCapability
        profile;  // a failed construction is retried (and raises) next time
    return profile;
  }

 private:
  DeviceCapability();
  const vdev::rt::CapabilityProfile* profile_;
  std::array<bool, static_cast<std::size_t>(c10::ScalarType::NumOptions)> refused_{};
  std::unordered_set<std::string> missing_;
  bool refuses_dtypes_ = false;
  bool lacks_operators_ = false;
};

// The operators (torch.library's names: "add.Tensor", "native_layer_norm") whose vdev kernel runs
// the checks made at the call, and so the check of a profile's lacking operators: those
// ops/fallback.cpp registers with the boxed kernel or the express lane (every other operator
// without a kernel of vdev's or a composite one reaches the boxed fallback). Noted while the
// kernels register (static initialisation); read when the profile is built.
VDEV_BACKEND_API void note_checked_kernel(const std::string& name);

// torch's name of a scalar type without "torch." ("float64"), as profiles name dtypes.
VDEV_BACKEND_API std::string torch_dtype_name(c10::ScalarType t);

}  // namespace vdev::backend
