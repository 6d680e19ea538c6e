// The metadata of an operator's returns, as a launch plan records it (launch_plan.h): sizes,
// strides and dtype per returned tensor, from a meta kernel or from CPU's kernel on a probe
// (cpu_shaped_returns.h).
//
// Thread rules: values; no state.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace vdev::backend {

// Metadata of one returned tensor (undefined: `defined` false).
struct MetaTensor {
  bool defined = false;
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool operator==(const MetaTensor& o) const {
    return defined == o.defined && sizes == o.sizes && strides == o.strides && dtype == o.dtype;
  }
};

// The metadata of `t` (of any device).
inline MetaTensor describe(const at::Tensor& t) {
  MetaTensor m;
  if (!t.defined()) return m;
  m.defined = true;
  m.sizes = t.sizes().vec();
  m.strides = t.strides().vec();
  m.dtype = t.scalar_type();
  return m;
}

// One return: a tensor, a list of tensors, or None.
struct MetaReturn {
  enum Kind { Tensor, TensorList, None } kind = None;
  std::vector<MetaTensor> tensors;
  bool operator==(const MetaReturn& o) const { return kind == o.kind && tensors == o.tensors; }
};

}  // namespace vdev::backend
