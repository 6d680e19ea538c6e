// A launch observer for tests (backend/common/launch.h): records what each launch and host run
// described and what the launch derived from it for the profiler's record and the thread policy,
// so a test can hold the tools' inputs against the one description.
//
// Thread rules: recording happens on queuing threads under one mutex; start/stop/take from any
// thread. Ownership: one recorder, never destroyed (an observer lives until exit).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backend/testing/probes.h"  // VDEV_TESTING_API

namespace vdev::backend::testing {

struct RecordedLaunch {
  bool host_run;  // a HostRun (no tag, no threads) instead of a launch
  std::string name, operation;
  int device;
  std::int64_t stream;
  int kind;  // vdev::rt::TaskKind
  std::uint64_t bytes, elements_hint, replays_capture;
  int threads_host_running, threads_host_waiting;
  bool whole_call;
  // (data address, bytes of the view's extent, access: 0 read, 1 write, 2 read-write)
  std::vector<std::tuple<std::uintptr_t, std::uint64_t, int>> uses;
};

VDEV_TESTING_API void start_recording_launches();
// Stops recording and returns what was recorded since the start.
VDEV_TESTING_API std::vector<RecordedLaunch> stop_recording_launches();

// The thread policy's limits for a task of `kind` with this size hint queued now (for comparing).
VDEV_TESTING_API std::tuple<int, int> policy_threads(int kind, std::uint64_t bytes,
                                                     std::uint64_t elements);

}  // namespace vdev::backend::testing
