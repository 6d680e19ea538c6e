// The torch release this build compiles against, and the differences of torch's C++ API between
// the supported releases (python/torch_vdev/_compat/releases.py), in this one header: the rest of
// the backend is written once and derives from or calls what is defined here. A build is for one
// release (the wheel is pinned to it), so these are compile-time choices; docs/torch-releases.md
// lists what each release changes for vdev.
//
// Thread rules and ownership: none (compile-time values and a class template).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/version.h>

#include <cstdint>

// True when the torch compiled against is release major.minor or newer.
#define VDEV_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace vdev::backend::torch_release {

// torch 2.14 (PR 191019) added the virtual c10::GeneratorImpl::philox_state(increment, seed,
// offset, intragraph_offset), torch.Generator.philox_state in Python; its default raises. A
// generator derives from GeneratorBase<Impl> and defines
//   void reserve_philox_state(uint64_t increment, at::Tensor& seed, at::Tensor& offset,
//                             at::Tensor& intragraph_offset);
// from 2.14 on it is the override; with 2.13 there is nothing to override and nothing calls it.
template <class Impl>
class GeneratorBase : public c10::GeneratorImpl {
 public:
  using c10::GeneratorImpl::GeneratorImpl;
#if VDEV_TORCH_AT_LEAST(2, 14)
  void philox_state(uint64_t increment, at::Tensor& seed, at::Tensor& offset,
                    at::Tensor& intragraph_offset) override {
    static_cast<Impl*>(this)->reserve_philox_state(increment, seed, offset, intragraph_offset);
  }
#endif
};

}  // namespace vdev::backend::torch_release
