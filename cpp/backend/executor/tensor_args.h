// Small helpers over the tensors inside operator arguments (IValues), shared by the executor's
// eligibility check, plan and task.
//
// Thread rules: stateless.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>

namespace vdev::backend {

inline bool is_vdev_tensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Maps every tensor inside an IValue (tensor, tensor list, optional tensor list); other values are
// returned unchanged.
template <typename F>
c10::IValue map_tensors(const c10::IValue& v, F f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(f(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const auto& t : v.toOptionalTensorList()) {
      const std::optional<at::Tensor> o = t;
      out.push_back(o ? std::optional<at::Tensor>(f(*o)) : std::nullopt);
    }
    return out;
  }
  return v;
}

}  // namespace vdev::backend
