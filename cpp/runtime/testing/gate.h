// Test-only tasks for deterministic tests of asynchronous behaviour (never timing-based). Built as
// their own library (libvdevrt_testing), so the runtime library exports none of them.
//
// A Gate is a host-controlled barrier: a task queued with enqueue_gate blocks its stream's worker
// until the gate opens, so everything queued behind it is provably pending. A Log records the
// order in which marker tasks ran. enqueue_failure queues a task that throws.
//
// Thread rules: all members are safe from any thread. Ownership: shared_ptr, shared by the test
// and the queued tasks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/stream.h"

#define VDEV_RT_TESTING_API __attribute__((visibility("default")))

namespace vdev::rt::testing {

class VDEV_RT_TESTING_API Gate {
 public:
  void open();
  bool is_open() const;
  // Number of tasks currently blocked on this gate.
  int waiting() const;
  // Blocks until open (or process exit).
  void wait();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

class VDEV_RT_TESTING_API Log {
 public:
  void append(std::int64_t v);
  std::vector<std::int64_t> values() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::int64_t> values_;
};

VDEV_RT_TESTING_API void enqueue_gate(Stream& s, std::shared_ptr<Gate> gate);
VDEV_RT_TESTING_API void enqueue_log(Stream& s, std::shared_ptr<Log> log, std::int64_t value);
VDEV_RT_TESTING_API void enqueue_failure(Stream& s, const std::string& message);

}  // namespace vdev::rt::testing
