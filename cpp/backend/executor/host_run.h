// Running a call synchronously on the host, on CPU aliases of its device arguments that share one
// CPU Storage per device Storage (common/cpu_alias.h: SharedCpuAliases).
//
// The executor's second way to run an operator, beside queueing it: CPU's kernel then performs
// its own checks on the host and raises at the call, with CPU's Python type. Two kinds of call
// run here:
//  * a written argument overlaps another argument (checks/overlap.h): ATen's overlap checks
//    compare Storages, which independent aliases of a queued task would hide;
//  * CPU's argument checks failed on stand-ins (checks/stand_in_check.h): the real arguments
//    settle whether the call is wrong (executor/enqueue.h: settle_on_the_host).
// A kernel that grows an out= argument moves its storage to host memory; it is copied back to the
// device grown, with CPU's resize, warning and check order (also when the kernel then fails:
// CPU's cat resizes its out= before its overlap check raises, and so does CUDA's).
//
// Thread rules: runs on the dispatching thread; it waits for the device's current stream first.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace vdev::backend {

// Runs `op` on the CPU aliases of the arguments on top of `stack`, after waiting for `device`'s
// current stream (the caller reports the wait, common/sync_debug.h); leaves its results on the
// stack as vdev tensors (written arguments themselves, other results copied to `device`).
void run_on_cpu_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                        c10::Device device);

}  // namespace vdev::backend
