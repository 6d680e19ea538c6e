// Capability profiles: what the simulated device is (VDEV_PROFILE, read once by runtime/config.h).
//
// A profile describes the device once: its name, compute capability, memory, the dtypes it cannot
// hold and the operators it lacks. The default profile is vdev's own CUDA-like device (every
// dtype, every operator, (1, 0), 4 GiB); the built-in names describe real devices (sm75, sm80,
// sm90, mps, see profile.cpp for the figures and their sources); a path ending in ".json" names a
// vendor's description:
//
//   {"name": "Acme A1",                 required: the device name, UTF-8, not only spaces
//    "capability": [9, 0],              optional: [major, minor], each in 0..99 (default [1, 0])
//    "memory": "16GiB",                 optional: bytes, or a size as VDEV_DEVICE_MEMORY (4GiB)
//    "multi_processor_count": 8,        optional: in 1..1048576 (default 2)
//    "dtypes": ["float32", "int64"],    optional: the dtypes it supports, at least one (default:
//                                       all)
//    "missing_operators": ["aten::cumsum", "aten::sort.stable"]}   optional: what it lacks
//
// The file is UTF-8 (a byte-order mark first is skipped, as Python's json skips it in bytes);
// a string that is not UTF-8 is refused naming its field, as are unknown keys.
//
// The runtime knows no torch: dtypes and operators are names, which the backend maps to its types
// (backend/common/device_capability.h) and checks at the call (backend/checks/capability_rules.h).
//
// Thread rules: the functions are pure (load_profile reads a file); a CapabilityProfile is
// immutable once the configuration holds it.
#pragma once

#include <string>
#include <vector>

#include "runtime/export.h"

namespace vdev::rt {

struct VDEV_RT_API CapabilityProfile {
  std::string id = "default";  // the built-in name, or the JSON file's path
  std::string device_name;     // empty: "vdev virtual device N"
  std::string memory;          // a size as VDEV_DEVICE_MEMORY takes it; empty: the default
  int major = 1;               // compute capability
  int minor = 0;
  int multi_processor_count = 2;
  // Whether bfloat16 is emulated rather than native (a T4: tensors and kernels work, the hardware
  // has no bfloat16 units; torch.cuda.is_bf16_supported(including_emulation=False) is False).
  bool bf16_emulated = false;
  std::vector<std::string> unsupported_dtypes;  // torch names ("float64"): creating one raises
  std::vector<std::string> missing_operators;   // "aten::name" (every overload) or "aten::n.ovl"

  // How messages name the profile: "'mps'", or "'Acme A1' (VDEV_PROFILE=/path/acme.json)".
  std::string describe() const;
};

// The built-in profile names, "default" first.
VDEV_RT_API const std::vector<std::string>& profile_names();

// The dtype names a profile may list: torch's names without "torch." (float32, bfloat16, ...).
VDEV_RT_API const std::vector<std::string>& profile_dtype_names();

// The profile VDEV_PROFILE=`value` selects: a built-in name (empty means "default"), or a path
// ending in ".json". Throws std::invalid_argument naming VDEV_PROFILE, the value and what is
// wrong (an unknown name with the valid ones, a file that cannot be read, invalid JSON with its
// line and column, a bad field with what it must be).
VDEV_RT_API CapabilityProfile load_profile(const std::string& value);

// Parses a JSON profile; `source` names it in the profile (its id) and in errors. Exposed for
// tests; throws as load_profile.
VDEV_RT_API CapabilityProfile parse_profile_json(const std::string& text,
                                                 const std::string& source);

}  // namespace vdev::rt
