// What the device's capability profile (VDEV_PROFILE, common/device_capability.h) refuses, at the
// call, with the error the described device raises:
//
//  * a dtype it cannot hold: creating a tensor of it on the device raises TypeError where the
//    device's tensors are made (ops/factories.cpp: empty and empty_strided, which every factory,
//    every conversion with .to() and every operator's output allocation goes through), as MPS
//    refuses float64 in empty_mps (aten/src/ATen/mps/EmptyTensor.cpp) with its own text:
//    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64.
//    Please use float32 instead." (and for complex128 getMPSDataType's "Trying to convert
//    ComplexDouble to the MPS backend but it does not have support for that dtype.");
//  * an operator it lacks: NotImplementedError naming the operator and the profile, first of the
//    checks of the boxed kernel (checks/call_checks.h), as a device without the kernel fails at
//    dispatch.
//
// With the default profile both are one predictable branch.
//
// Thread rules: stateless over an immutable profile; on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>

#include "backend/common/device_capability.h"

namespace vdev::backend {

namespace detail {
[[noreturn]] void refuse_dtype(const DeviceCapability& p, c10::ScalarType dtype);
void refuse_if_lacking(const DeviceCapability& p, const c10::OperatorHandle& op);
}  // namespace detail

// Raises the described device's TypeError if it cannot hold `dtype`.
inline void refuse_dtype_the_profile_lacks(c10::ScalarType dtype) {
  const DeviceCapability& p = DeviceCapability::get();
  if (C10_UNLIKELY(p.refuses_dtypes()) && p.refuses(dtype)) detail::refuse_dtype(p, dtype);
}

// Raises NotImplementedError naming the operator and the profile if the profile lacks `op`.
inline void refuse_operator_the_profile_lacks(const c10::OperatorHandle& op) {
  const DeviceCapability& p = DeviceCapability::get();
  if (C10_UNLIKELY(p.lacks_operators())) detail::refuse_if_lacking(p, op);
}

}  // namespace vdev::backend
