// The device timeline of one profiling session: every task the streams ran and every host call
// that waited for the device while the session recorded, as the runtime reports them
// (runtime/task_trace.h), and the launch correlation of each host thread (the profiler's id of
// the host operator that queues work).
//
// Kineto's session (profiler/kineto_plugin.cpp) starts and stops it and turns its records into
// activities; this file has no Kineto or torch dependency.
//
// Thread rules: start/stop/take on the profiler's thread; on_task/on_host_call on stream workers
// and host threads, concurrently (one mutex around the record vectors); push/pop_correlation on
// the thread running a host operator (a thread_local stack, reset when a new session starts).
// Ownership: the timeline owns its records until take() hands them over.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "runtime/task_trace.h"

namespace vdev::backend {

class DeviceTimeline final : public vdev::rt::TaskObserver {
 public:
  // The process's one timeline (one profiling session records at a time, as Kineto runs one).
  static DeviceTimeline& instance();

  void start();  // installs itself as the runtime's task observer; forgets earlier records
  void stop();   // uninstalls itself: no record is added after it returns

  struct Records {
    std::vector<vdev::rt::TaskRecord> tasks;
    std::vector<vdev::rt::HostCallRecord> host_calls;
  };
  Records take();

  // The innermost host operator of the calling thread, while the session records.
  void push_correlation(std::uint64_t id);
  void pop_correlation();

  void on_task(const vdev::rt::TaskRecord& record) noexcept override;
  void on_host_call(const vdev::rt::HostCallRecord& record) noexcept override;

 private:
  DeviceTimeline() = default;
  std::mutex mu_;
  Records records_;  // guarded by mu_
};

}  // namespace vdev::backend
