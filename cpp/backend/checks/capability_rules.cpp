#include "backend/checks/capability_rules.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

namespace vdev::backend::detail {

void refuse_dtype(const DeviceCapability& p, c10::ScalarType dtype) {
  const vdev::rt::CapabilityProfile& d = p.description();
  if (d.id == "mps") {  // MPS's own texts (see the header)
    TORCH_CHECK_TYPE(dtype != c10::ScalarType::Double,
                     "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                     "support float64. Please use float32 instead.");
    TORCH_CHECK_TYPE(false, "Trying to convert ", dtype,
                     " to the MPS backend but it does not have support for that dtype.");
  }
  std::string supported;
  for (const std::string& name : vdev::rt::profile_dtype_names()) {
    const auto& refused = d.unsupported_dtypes;
    if (std::find(refused.begin(), refused.end(), name) != refused.end()) continue;
    supported += (supported.empty() ? "" : ", ") + name;
  }
  TORCH_CHECK_TYPE(false, "torch.", torch_dtype_name(dtype),
                   " is not supported by the vdev device of profile ", d.describe(),
                   ": it has no tensors of this dtype (its dtypes: ", supported, ")");
}

void refuse_if_lacking(const DeviceCapability& p, const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  if (!p.lacks(schema.name(), schema.overload_name())) return;
  std::string full = schema.name();
  if (!schema.overload_name().empty()) full += "." + schema.overload_name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", full,
                              "' is not currently implemented for the vdev device: its profile ",
                              p.description().describe(), " lacks it.");
}

}  // namespace vdev::backend::detail
