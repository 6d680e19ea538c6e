#include "runtime/stream_registry.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/device_assert.h"
#include "runtime/errors.h"
#include "runtime/happens_before.h"
#include "runtime/process.h"
#include "runtime/task_trace.h"

namespace vdev::rt {
namespace {

void stop_all_streams() noexcept;  // registered as a shutdown step with the first stream table

constexpr std::int64_t kFirstPoolId = 1;
constexpr std::int64_t kFirstHighPoolId = kFirstPoolId + kStreamsPerPool;
constexpr std::int64_t kFirstNewId = kFirstHighPoolId + kStreamsPerPool;

// All streams of one device. Slots are filled once and never cleared, so readers need no lock.
// Scans (synchronize_device, wait_device_idle, exit) stop at `in_use`, one past the highest id
// created: a device whose program uses only the default stream and the pools scans at most 65
// slots, not the whole table.
struct DeviceStreams {
  std::array<std::atomic<Stream*>, kMaxStreamsPerDevice> slots{};
  std::atomic<std::int64_t> in_use{0};
  std::mutex create_mu;
  std::int64_t next_new_id = kFirstNewId;  // guarded by create_mu
  std::atomic<std::uint32_t> pool_cursor[2] = {0, 0};

  // Publishes a stream in its slot. Caller holds create_mu.
  void publish(std::int64_t id, Stream* s) {
    slots[static_cast<std::size_t>(id)].store(s, std::memory_order_release);
    if (id + 1 > in_use.load(std::memory_order_relaxed)) {
      in_use.store(id + 1, std::memory_order_release);
    }
  }
  // Calls f(stream) for every stream created so far.
  template <typename F>
  void for_each(F f) {
    const std::int64_t n = in_use.load(std::memory_order_acquire);
    for (std::int64_t id = 0; id < n; ++id) {
      if (Stream* s = slots[static_cast<std::size_t>(id)].load(std::memory_order_acquire)) f(s);
    }
  }
};

// Leaked on purpose (runtime/process.h): workers may still run during static destruction.
DeviceStreams* device_streams(int device) {
  static DeviceStreams* all = [] {
    auto* a = new DeviceStreams[kMaxDevices];
    for (int d = 0; d < kMaxDevices; ++d)
      register_fork_lock(&a[d].create_mu, ForkLockLevel::kStreamTable);
    register_shutdown_step(&stop_all_streams);  // exit stops the workers (runtime/process.h)
    return a;
  }();
  check_device_index(device, "stream");
  return &all[device];
}

int clamp_priority(int priority) {
  return std::clamp(priority, kHighestStreamPriority, kLowestStreamPriority);
}

Stream& get_or_create(DeviceStreams* ds, int device, std::int64_t id, int priority) {
  Stream* s = ds->slots[static_cast<std::size_t>(id)].load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  std::lock_guard<std::mutex> lock(ds->create_mu);
  s = ds->slots[static_cast<std::size_t>(id)].load(std::memory_order_relaxed);
  if (s == nullptr) {
    s = new Stream(device, id, priority);
    ds->publish(id, s);
  }
  return *s;
}

int pool_priority(std::int64_t id) {
  return id >= kFirstHighPoolId ? kHighestStreamPriority : kLowestStreamPriority;
}

thread_local std::array<Stream*, kMaxDevices> tls_current{};

}  // namespace

Stream& default_stream(int device) {
  return get_or_create(device_streams(device), device, 0, kLowestStreamPriority);
}

Stream& pool_stream(int device, bool high_priority) {
  DeviceStreams* ds = device_streams(device);
  const std::uint32_t k = ds->pool_cursor[high_priority ? 1 : 0].fetch_add(1) % kStreamsPerPool;
  const std::int64_t id = (high_priority ? kFirstHighPoolId : kFirstPoolId) + k;
  return get_or_create(ds, device, id, pool_priority(id));
}

Stream& new_stream(int device, int priority) {
  DeviceStreams* ds = device_streams(device);
  std::lock_guard<std::mutex> lock(ds->create_mu);
  if (ds->next_new_id >= kMaxStreamsPerDevice) {
    fail<std::runtime_error>("new_stream", "vdev:", device, " already has ",
                             kMaxStreamsPerDevice - kFirstNewId,
                             " new streams (the limit); reuse streams or take them from the pool");
  }
  const std::int64_t id = ds->next_new_id++;
  auto* s = new Stream(device, id, clamp_priority(priority));
  ds->publish(id, s);
  return *s;
}

Stream& stream_from_id(int device, std::int64_t id) {
  DeviceStreams* ds = device_streams(device);
  if (id >= 0 && id < kFirstNewId) return get_or_create(ds, device, id, pool_priority(id));
  Stream* s = id >= 0 && id < kMaxStreamsPerDevice
                  ? ds->slots[static_cast<std::size_t>(id)].load(std::memory_order_acquire)
                  : nullptr;
  if (s == nullptr) {
    fail<std::invalid_argument>("stream", "unknown vdev stream id ", id, " on vdev:", device);
  }
  return *s;
}

Stream& current_stream(int device) {
  check_device_index(device, "current_stream");
  Stream* s = tls_current[static_cast<std::size_t>(device)];
  return s != nullptr ? *s : default_stream(device);
}

Stream& exchange_current_stream(Stream& s) {
  Stream& prev = current_stream(s.device());
  tls_current[static_cast<std::size_t>(s.device())] = &s;
  return prev;
}

void synchronize_device(int device) {
  check_device_index(device, "synchronize");
  check_capture_permits("synchronize");  // a device-wide wait is "unsafe" during capture
  DeviceStreams* ds = device_streams(device);
  const std::int64_t start = task_tracing() ? trace_clock_ns() : 0;
  // Every failed stream is reported: the first one's error, of its kind, names the others.
  std::optional<ErrorKind> kind;
  std::string message;
  ds->for_each([&](Stream* s) {
    if (s->enqueued_count() == 0) return;
    if (s->capture_id() != 0) {  // a capture that permits this (relaxed): its work before it
      s->wait_for(s->enqueued_count());
      return;
    }
    try {
      s->synchronize(/*device_assert=*/false);
    } catch (const std::exception& e) {
      if (!kind) {
        kind = current_error_kind();
        message = e.what();
      } else {
        message += detail::cat("; another stream failed too: ", e.what());
      }
    }
  });
  if (start != 0) report_host_call("vdevDeviceSynchronize", device, -1, start);
  if (kind) throw_error(*kind, message);
  if (device_asserted(device)) throw_device_asserted(device, "synchronize");
}

namespace {
// A device-wide wait (the caching allocator's before it releases memory, as cudaFree synchronizes
// the device) orders what follows after the device's work, for the stream sanitizer too.
hb::ClockPtr clock_before_wait(const Stream& s) noexcept {
  try {
    return hb::clock_of(s);
  } catch (...) {  // out of memory: the edge is lost (a missed report, never a false one)
    return nullptr;
  }
}
}  // namespace

void wait_device_idle(int device) noexcept {
  DeviceStreams* ds = nullptr;
  try {
    ds = device_streams(device);
  } catch (...) {
    return;
  }
  ds->for_each([](Stream* s) {
    const hb::ClockPtr clock = clock_before_wait(*s);
    s->wait_for(s->enqueued_count());
    hb::host_learns(clock);
  });
}

bool wait_device_idle_unless_stopping(int device) noexcept {
  DeviceStreams* ds = nullptr;
  try {
    ds = device_streams(device);
  } catch (...) {
    return !stopping();
  }
  ds->for_each([](Stream* s) {
    const hb::ClockPtr clock = clock_before_wait(*s);
    s->wait_for(s->enqueued_count(), /*park_strays=*/false);
    hb::host_learns(clock);
  });
  return !stopping();
}

namespace {

// Process exit (runtime/process.h): stops every worker, waits for the running tasks, prints the
// errors no synchronize reported.
void stop_all_streams() noexcept {
  const int n = device_count_noexcept();
  std::vector<Stream*> all;
  for (int d = 0; d < n; ++d) {
    DeviceStreams* ds = nullptr;
    try {
      ds = device_streams(d);
    } catch (...) {
      return;
    }
    ds->for_each([&](Stream* s) { all.push_back(s); });
  }
  for (Stream* s : all) s->request_stop();
  // Running tasks are waited for without a limit (runtime/process.h): a kernel always ends, and
  // static destruction under a running kernel crashes. Say what exit waits for, now and then.
  auto next_report = std::chrono::steady_clock::now() + kExitReportEvery;
  for (Stream* s : all) {
    while (s->worker_busy()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (std::chrono::steady_clock::now() >= next_report) {
        std::fprintf(stderr, "vdev: exit waits for the running task [%s] on vdev:%d stream %lld\n",
                     s->running_task(), s->device(), static_cast<long long>(s->id()));
        next_report += kExitReportEvery;
      }
    }
  }
  // An error no synchronize reported would vanish with the process: say so on stderr.
  for (Stream* s : all) {
    try {
      if (std::optional<std::string> errors = s->unreported_errors()) {
        std::fprintf(stderr, "vdev: queued work failed and no synchronize reported it: %s\n",
                     errors->c_str());
      }
    } catch (...) {  // out of memory at exit: nothing more to say
    }
  }
}

}  // namespace

}  // namespace vdev::rt
