// Which devices an operator's tensor arguments may be on, decided as CUDA decides it, once for all
// operators rather than per operator.
//
// CUDA's rules come from two places, and vdev derives its rule for each operator the same way:
//  * torchgen wraps each CUDA kernel in c10::impl::check_and_update_common_device over its out=
//    and positional tensor arguments: every one must be on the same device, a 0-dim CPU tensor
//    included ("Expected all tensors to be on the same device, but got mat2 is on cpu, different
//    from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__mm)").
//  * Operators marked `device_check: NoCheck` in native_functions.yaml check for themselves; they
//    are TensorIterator operators (CPU 0-dim tensors allowed as read inputs: "Expected all tensors
//    to be on the same device, but found at least two devices, cuda:0 and cpu!") and a few with
//    their own exceptions (advanced indexing takes CPU index tensors), listed in device_rules.cpp
//    with the PyTorch source that decides each.
// The NoCheck list is generated at build time from the yaml torchgen ships in the torch wheel
// (tools/gen_device_checks.py).
//
// Thread rules: safe from any thread; an operator's rule is derived on first use and cached.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <initializer_list>
#include <optional>
#include <utility>

namespace vdev::backend {

// Checks the devices of the operator's arguments on `stack` (its last arguments) and returns the
// vdev device it runs on: that of its vdev tensors, else of a vdev Device argument, else nullopt.
// Raises CUDA's error (RuntimeError) for a tensor on another device that the rule does not allow.
std::optional<c10::Device> check_operator_devices(const c10::OperatorHandle& op,
                                                  const torch::jit::Stack& stack);

// An operator's rule, derived once (for callers that keep it: the express lane's operators).
struct DeviceRule;
const DeviceRule& device_rule(const c10::OperatorHandle& op);

// The same check on unboxed arguments, for the express lane (executor/express.h): `tensors[i]` is
// the operator's argument i, nullptr where that is not a tensor. The vdev device of its vdev
// tensors (nullopt: none); raises what the form above raises for the same call.
std::optional<c10::Device> check_operator_devices(const DeviceRule& rule,
                                                  c10::ArrayRef<const at::Tensor*> tensors);

// The device check torchgen gives a CUDA kernel, for vdev's own unboxed kernels: every defined
// tensor on one device. `method` names the kernel in the message.
void check_same_device(const char* method,
                       std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors);

}  // namespace vdev::backend
