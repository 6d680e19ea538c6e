// Walkers over the tensors inside operator arguments (IValues): a tensor, a tensor list or an
// optional tensor list. Shared by the checks at a call, the executor and the synchronous paths.
//
// Thread rules: stateless.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>

#include "backend/common/vdev_device.h"

namespace vdev::backend {

inline bool is_vdev_tensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == kVdev;
}

// Calls `f` on every tensor inside an IValue (undefined ones included) until it returns true;
// returns whether one did. Allocates nothing (no vector of the list is made): it runs for every
// operator call.
template <typename F>
bool any_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (f(t)) return true;
    }
  } else if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      if (t.has_value() && f(*t)) return true;
    }
  }
  return false;
}

// Calls `f` on every tensor inside an IValue.
template <typename F>
void for_each_tensor(const c10::IValue& v, F&& f) {
  any_tensor(v, [&](const at::Tensor& t) {
    f(t);
    return false;
  });
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
