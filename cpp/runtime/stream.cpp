#include "runtime/stream.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/process.h"

namespace vdev::rt {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until pred() or `limit` has passed; returns pred().
template <typename Pred>
bool spin_until(Pred pred, std::chrono::microseconds limit) {
  if (pred()) return true;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
  }
  return pred();
}

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

std::atomic<bool> detail::fail_next_worker_start{false};

Stream::Stream(int device, std::int64_t id, int priority)
    : device_(device), id_(id), priority_(priority) {
  errors_.reserve(kMaxKeptErrors);  // keep_error never grows it: it cannot fail to record one
  register_fork_lock(&mu_, ForkLockLevel::kStreams);
}

std::string Stream::errors_message_locked(const std::vector<const TaskError*>& errors,
                                          std::size_t not_kept) const {
  auto text = [&](const TaskError& e) {
    return e.message.empty() ? detail::cat("a task failed on vdev:", device_, " stream ", id_,
                                           " (its message was lost: out of memory)")
                             : e.message;
  };
  std::string message = text(*errors.front());
  const std::size_t later = errors.size() - 1 + not_kept;
  if (later > 0) {
    message += detail::cat("; and ", later, " later error(s) on this stream:");
    for (std::size_t i = 1; i < errors.size(); ++i) message += " " + text(*errors[i]) + ";";
    if (not_kept > 0) message += detail::cat(" and ", not_kept, " more");
  }
  return message;
}

std::optional<std::string> Stream::unreported_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const TaskError*> unreported;
  for (const TaskError& e : errors_) {
    if (!e.reported) unreported.push_back(&e);
  }
  if (unreported.empty()) return std::nullopt;
  return errors_message_locked(unreported, errors_not_kept_);
}

void Stream::throw_pending_error_locked(std::unique_lock<std::mutex>& lock) {
  if (errors_.empty()) return;  // the common case: one branch
  // Delivery (stream.h): every error once to the first thread that looks, and once to the thread
  // that queued its task.
  const std::thread::id me = std::this_thread::get_id();
  std::vector<const TaskError*> due;
  for (const TaskError& e : errors_) {
    if (!e.reported || e.origin == me) due.push_back(&e);
  }
  if (due.empty()) return;
  const ErrorKind kind = due.front()->kind;
  const bool first_report = !due.front()->reported;
  std::string message = errors_message_locked(due, first_report ? errors_not_kept_ : 0);
  if (first_report) errors_not_kept_ = 0;
  // Dropped once its queuing thread has learnt of it; otherwise that thread still has to.
  errors_.erase(std::remove_if(errors_.begin(), errors_.end(),
                               [&](const TaskError& e) { return e.origin == me; }),
                errors_.end());
  for (TaskError& e : errors_) e.reported = true;
  lock.unlock();
  throw_error(kind, message);
}

void Stream::enqueue(const char* name, TaskFn fn) {
  check_not_forked("enqueue");
  if (stopping()) {
    park_if_stray_at_exit();
    fail<std::runtime_error>("enqueue", "the vdev runtime is shutting down");
  }
  bool wake = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (capture_ != nullptr) {
      detail::record_task(*capture_, *this, name, std::move(fn));  // recorded, not run
      return;
    }
    throw_pending_error_locked(lock);
    // The worker first: if its thread cannot be created, nothing is queued or counted (a counted
    // task without a worker would make every later synchronize wait forever).
    if (!worker_running_) start_worker_locked();
    queue_.push_back(Item{name, std::move(fn), std::this_thread::get_id()});
    enqueued_.fetch_add(1);
    wake = worker_sleeping_;
  }
  if (wake) work_cv_.notify_one();
  if (config().launch_blocking) synchronize();  // errors surface at the operation itself
}

bool Stream::query() const noexcept { return completed_.load() == enqueued_.load(); }

void Stream::synchronize() {
  check_not_forked("synchronize");
  check_not_capturing("synchronize");
  const std::uint64_t target = enqueued_.load();
  wait_for(target);
  if (completed_.load() < target) {  // only at exit: the work was abandoned
    fail<std::runtime_error>("synchronize",
                             "the vdev runtime is shutting down: work queued on vdev:", device_,
                             " stream ", id_, " was abandoned");
  }
  std::unique_lock<std::mutex> lock(mu_);
  throw_pending_error_locked(lock);
}

void Stream::wait_for(std::uint64_t target, bool park_strays) noexcept {
  if (in_bad_fork()) return;  // no worker will ever complete anything here
  auto done = [&] { return completed_.load() >= target || stopping(); };
  if (!spin_until(done, kHostSpin)) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done()) {
      // Publish the lowest count any waiter needs; the worker notifies once it gets there. A
      // waiter woken for a lower target re-publishes its own.
      if (target < wake_at_.load()) wake_at_.store(target);
      if (done()) break;
      done_cv_.wait_for(lock, std::chrono::milliseconds(100));  // also polls `stopping`
    }
  }
  if (park_strays) park_if_stray_at_exit();  // a daemon thread must not go back to Python at exit
}

std::shared_ptr<Capture> Stream::capture() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capture_;
}

void Stream::check_not_capturing(const char* operation) {
  if (capture_id() == 0) return;
  if (std::shared_ptr<Capture> c = capture()) {
    fail_capture(*c, operation,
                 detail::cat("vdev:", device_, " stream ", id_, " is capturing a graph, and ",
                             operation, " would wait for work that is only recorded"));
  }
}

bool Stream::attach_capture(std::shared_ptr<Capture> c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_ != nullptr) return false;
  capture_id_.store(vdev::rt::capture_id(*c), std::memory_order_release);
  capture_ = std::move(c);
  return true;
}

bool Stream::join_capture(const std::shared_ptr<Capture>& c, const CaptureClock& clock) {
  // Under this stream's mutex: end_capture either sees the new member (and detaches it after
  // taking this mutex) or has ended first (add_member refuses). Lock order: stream, capture.
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_ != nullptr) return false;
  if (!detail::add_member(*c, *this, clock)) return true;
  capture_id_.store(vdev::rt::capture_id(*c), std::memory_order_release);
  capture_ = c;
  return true;
}

void Stream::detach_capture(const Capture* c) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_.get() != c) return;
  capture_.reset();
  capture_id_.store(0, std::memory_order_release);
}

std::optional<std::pair<ErrorKind, std::string>> Stream::peek_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (errors_.empty()) return std::nullopt;
  return std::make_pair(errors_.front().kind, errors_.front().message);
}

void Stream::start_worker_locked() {
  mark_initialised();
  try {
    if (detail::fail_next_worker_start.exchange(false)) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    }
    std::thread([this] {
      mark_worker_thread();
      worker_loop();
      if (stopping()) park_forever();  // no thread exit at process exit: see runtime/process.h
    }).detach();                       // never joined
  } catch (const std::system_error& e) {
    fail<std::runtime_error>("enqueue", "cannot start the worker thread of vdev:", device_,
                             " stream ", id_, ": ", e.what(),
                             " (too many threads? nothing was queued)");
  }
  worker_running_ = true;
}

void Stream::worker_loop() {
  // Swapped with queue_ in one go: one lock round trip per batch. (A deque: measured faster than a
  // vector or recycled chunks for bursts of tasks with benchmarks/cpp/bench_streams.cpp's
  // throughput figure; see commit 871c4e3.)
  std::deque<Item> batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty()) {
      lock.unlock();
      // Bounded spin: back-to-back work is picked up without a sleep/wake round trip.
      spin_until([&] { return completed_.load() != enqueued_.load() || stopping(); }, kWorkerSpin);
      lock.lock();
      worker_sleeping_ = true;
      const bool woke =
          work_cv_.wait_for(lock, kWorkerIdleExit, [&] { return !queue_.empty() || stopping(); });
      worker_sleeping_ = false;
      if (stopping() || (!woke && queue_.empty())) {
        worker_running_ = false;  // decided under the lock: the next enqueue starts a new worker
        return;
      }
      continue;
    }
    if (stopping()) {
      worker_running_ = false;  // queued work is abandoned at exit
      return;
    }
    // Take everything queued in one go: one lock round trip per batch, not per task.
    batch.swap(queue_);
    busy_.store(true);
    lock.unlock();
    for (Item& item : batch) {
      if (stopping()) break;  // queued work is abandoned at exit
      running_.store(item.name, std::memory_order_relaxed);
      run(item);
      item.fn = nullptr;  // destroy the captures on this thread, before signalling
      const std::uint64_t done = completed_.fetch_add(1) + 1;
      // seq_cst on completed_ and wake_at_ pairs with synchronize(): either the waiter sees the
      // new count or this thread sees the waiter's target.
      if (done >= wake_at_.load()) {
        std::lock_guard<std::mutex> wlock(mu_);
        wake_at_.store(kNoWaiter);
        done_cv_.notify_all();
      }
    }
    batch.clear();
    busy_.store(false);
    lock.lock();
  }
}

void Stream::run(Item& item) noexcept {
  try {
    item.fn();
  } catch (const std::exception& e) {
    keep_error(current_error_kind(), item, e.what());
  } catch (...) {
    keep_error(ErrorKind::kRuntime, item, "unknown error");
  }
}

void Stream::keep_error(ErrorKind kind, const Item& item, const char* what) noexcept {
  const char* name = item.name;
  std::lock_guard<std::mutex> lock(mu_);
  if (errors_.size() >= kMaxKeptErrors) {
    ++errors_not_kept_;
    return;
  }
  std::string message;
  try {
    message = detail::cat("[", name, "] ", what, " (on vdev:", device_, " stream ", id_, ")");
  } catch (...) {  // out of memory: keep that there was an error, without its message
  }
  errors_.push_back(TaskError{kind, std::move(message), item.origin, false});  // reserved room
}

void Stream::request_stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
}

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
      s->synchronize();
    } catch (const std::exception& e) {
      if (!kind) {
        kind = current_error_kind();
        message = e.what();
      } else {
        message += detail::cat("; another stream failed too: ", e.what());
      }
    }
  });
  if (kind) throw_error(*kind, message);
}

void wait_device_idle(int device) noexcept {
  DeviceStreams* ds = nullptr;
  try {
    ds = device_streams(device);
  } catch (...) {
    return;
  }
  ds->for_each([](Stream* s) { s->wait_for(s->enqueued_count()); });
}

bool wait_device_idle_unless_stopping(int device) noexcept {
  DeviceStreams* ds = nullptr;
  try {
    ds = device_streams(device);
  } catch (...) {
    return !stopping();
  }
  ds->for_each([](Stream* s) { s->wait_for(s->enqueued_count(), /*park_strays=*/false); });
  return !stopping();
}

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

}  // namespace vdev::rt
