// The stream sanitizer's view of host operators on pinned memory: a CPU operator that reads the
// destination of a non_blocking device-to-host copy that has not finished (the host did not
// synchronize with it), or writes the source of a non_blocking host-to-device copy still pending.
// A torch.profiler-style RecordFunction callback (ATen's, global) sees every operator call with its
// arguments; the operators whose tensors lie in pinned memory are checked as host accesses.
//
// Reported as warnings, also when the sanitizer raises: ATen runs RecordFunction callbacks inside
// a try block that logs and swallows what they throw (tryRunCallback in
// aten/src/ATen/record_function.cpp), so no callback can fail the operator. The finding is kept
// with the others (torch.vdev.sanitizer.findings()).
//
// Thread rules: watch_host_operators is called under the settings' mutex; the callback runs on
// any thread and ignores stream workers (their copies are the device's side).
#pragma once

namespace vdev::backend {

void watch_host_operators(bool on);

}  // namespace vdev::backend
