#include "runtime/stream.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/config.h"
#include "runtime/device_assert.h"
#include "runtime/errors.h"
#include "runtime/fault_injection.h"
#include "runtime/happens_before.h"
#include "runtime/machine_load.h"
#include "runtime/process.h"
#include "runtime/task_trace.h"

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

std::atomic<std::int64_t> g_worker_idle_exit_ms{
    std::chrono::duration_cast<std::chrono::milliseconds>(kWorkerIdleExit).count()};

}  // namespace

std::chrono::milliseconds worker_idle_exit() noexcept {
  return std::chrono::milliseconds(g_worker_idle_exit_ms.load(std::memory_order_relaxed));
}

void set_worker_idle_exit(std::chrono::milliseconds wait) noexcept {
  g_worker_idle_exit_ms.store(wait.count(), std::memory_order_relaxed);
}

Stream::Stream(int device, std::int64_t id, int priority)
    : device_(device), id_(id), priority_(priority) {
  errors_.reserve(kMaxKeptErrors);  // keep_error never grows it: it cannot fail to record one
  // Never held together: the order does not matter.
  register_fork_lock(&mu_, ForkLockLevel::kStreams);
  register_fork_lock(&push_mu_, ForkLockLevel::kStreams);
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
  has_errors_.store(!errors_.empty(), std::memory_order_release);
  lock.unlock();
  throw_error(kind, message);
}

void Stream::enqueue(const char* name, TaskFn fn, TaskTag tag) {
  check_not_forked("enqueue");
  if (stopping()) {
    park_if_stray_at_exit();
    fail<std::runtime_error>("enqueue", "the vdev runtime is shutting down");
  }
  // The one load when nothing observes tasks (runtime/task_trace.h).
  const std::int64_t launch = __builtin_expect(task_tracing(), false) ? trace_clock_ns() : 0;
  if (__builtin_expect(capture_id() != 0 || has_errors_.load(std::memory_order_acquire) ||
                           device_asserted(device_),
                       false)) {
    std::unique_lock<std::mutex> lock(mu_);
    if (capture_ != nullptr && !device_asserted(device_)) {
      capture_->record(*this, name, std::move(fn), tag);  // recorded, not run
      return;
    }
    throw_pending_error_locked(lock);  // this stream's own first (the assert itself, once)
    if (device_asserted(device_)) {
      lock.unlock();
      throw_device_asserted(device_, name);
    }
  }
  {
    std::lock_guard<std::mutex> lock(push_mu_);
    // The worker first: if its thread cannot be created, nothing is queued or counted (a counted
    // task without a worker would make every later synchronize wait forever).
    if (!worker_running_) start_worker_locked();
    Item& item = next_free_slot_locked();
    item.name = name;
    item.fn = std::move(fn);
    item.origin = std::this_thread::get_id();
    item.launch_ns = launch;
    if (launch != 0) {
      item.tag = tag;
      item.launch_id = next_launch_id();
      item.correlation = launch_correlation();
      item.host_thread = trace_thread_id();
      item.launch_end_ns = trace_clock_ns();
    }
    // Published (seq_cst: pairs with the worker's worker_sleeping_ store before it sleeps).
    enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1);
  }
  if (worker_sleeping_.load()) {
    const std::lock_guard<std::mutex> lock(mu_);  // the worker waits on work_cv_ or sees the count
    work_cv_.notify_one();
  }
  if (config().launch_blocking) synchronize();  // errors surface at the operation itself
}

Stream::Item& Stream::next_free_slot_locked() {
  if (tail_ == nullptr || tail_used_ == kChunkItems) {
    Chunk* fresh = spare_.exchange(nullptr, std::memory_order_acquire);
    if (fresh == nullptr) fresh = new Chunk;  // bad_alloc: nothing changed
    if (tail_ == nullptr) {
      head_ = fresh;  // the worker reads it once the first item is published
    } else {
      tail_->next.store(fresh, std::memory_order_release);
    }
    tail_ = fresh;
    tail_used_ = 0;
  }
  return tail_->items[tail_used_++];
}

Stream::Item& Stream::next_queued_item() noexcept {
  if (head_used_ == kChunkItems) {  // linked before the item now published
    Chunk* done = head_;
    head_ = done->next.load(std::memory_order_acquire);
    head_used_ = 0;
    done->next.store(nullptr, std::memory_order_relaxed);
    delete spare_.exchange(done, std::memory_order_acq_rel);  // at most one kept
  }
  return head_->items[head_used_++];
}

bool Stream::query() const noexcept {
  if (!hb::tracking()) return completed_.load() == enqueued_.load();
  hb::ClockPtr clock;  // taken before looking: what a true answer covers
  try {
    clock = hb::clock_of(*this);
  } catch (...) {  // out of memory: the answer still stands, the edge is lost
  }
  const bool done = completed_.load() == enqueued_.load();
  if (done) hb::host_learns(clock);
  return done;
}

void Stream::synchronize(bool device_assert) {
  check_not_forked("synchronize");
  check_not_capturing("synchronize");
  const hb::ClockPtr clock = hb::clock_of(*this);  // null unless the sanitizer tracks
  const std::uint64_t target = enqueued_.load();
  const std::int64_t start = task_tracing() ? trace_clock_ns() : 0;
  wait_for(target);
  if (start != 0) report_host_call("vdevStreamSynchronize", device_, id_, start);
  if (completed_.load() < target) {  // only at exit: the work was abandoned
    fail<std::runtime_error>("synchronize",
                             "the vdev runtime is shutting down: work queued on vdev:", device_,
                             " stream ", id_, " was abandoned");
  }
  hb::host_learns(clock);
  std::unique_lock<std::mutex> lock(mu_);
  throw_pending_error_locked(lock);
  if (device_assert && device_asserted(device_)) {
    lock.unlock();
    throw_device_asserted(device_, "synchronize");
  }
}

void Stream::wait_for(std::uint64_t target, bool park_strays) noexcept {
  if (in_bad_fork()) return;  // no worker will ever complete anything here
  auto done = [&] { return completed_.load() >= target || stopping(); };
  if (!done()) {
    const DeviceWait waiting(on_stream_worker());  // runtime/machine_load.h
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
  }
  if (park_strays) park_if_stray_at_exit();  // a daemon thread must not go back to Python at exit
}

std::shared_ptr<TaskRecorder> Stream::capture() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capture_;
}

void Stream::check_not_capturing(const char* operation) {
  if (capture_id() == 0) return;
  if (std::shared_ptr<TaskRecorder> c = capture()) {
    c->invalidate_and_throw(
        operation, detail::cat("vdev:", device_, " stream ", id_, " is capturing a graph, and ",
                               operation, " would wait for work that is only recorded"));
  }
}

bool Stream::attach_capture(std::shared_ptr<TaskRecorder> c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_ != nullptr) return false;
  capture_id_.store(c->id(), std::memory_order_release);
  capture_ = std::move(c);
  return true;
}

bool Stream::join_capture(const std::shared_ptr<TaskRecorder>& c, const CaptureClock& clock) {
  // Under this stream's mutex: end_capture either sees the new member (and detaches it after
  // taking this mutex) or has ended first (add_member refuses). Lock order: stream, capture.
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_ != nullptr) return false;
  if (!c->add_member(*this, clock)) return true;
  capture_id_.store(c->id(), std::memory_order_release);
  capture_ = c;
  return true;
}

void Stream::detach_capture(const TaskRecorder* c) noexcept {
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
    if (take_injected_fault(Fault::kWorkerStart)) {
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
  ++worker_starts_;
}

bool Stream::worker_running() const {
  const std::lock_guard<std::mutex> lock(push_mu_);
  return worker_running_;
}

std::uint64_t Stream::worker_starts() const {
  const std::lock_guard<std::mutex> lock(push_mu_);
  return worker_starts_;
}

namespace {
thread_local bool t_on_worker = false;
}  // namespace

bool on_stream_worker() noexcept { return t_on_worker; }

bool Stream::worker_should_exit(std::uint64_t done) noexcept {
  // Under push_mu_, which every producer holds from its worker check to its publish: either a
  // producer has published (the worker stays) or the next one sees the worker gone and starts one.
  const std::lock_guard<std::mutex> lock(push_mu_);
  if (enqueued_.load(std::memory_order_relaxed) != done) return false;
  worker_running_ = false;
  return true;
}

void Stream::worker_loop() {
  t_on_worker = true;
  // Only this thread writes completed_: `done` is its value.
  std::uint64_t done = completed_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t published = enqueued_.load(std::memory_order_acquire);
    if (published == done) {
      // Bounded spin: back-to-back work is picked up without a sleep/wake round trip.
      spin_until([&] { return enqueued_.load(std::memory_order_acquire) != done || stopping(); },
                 kWorkerSpin);
      if (stopping()) return;  // queued work is abandoned at exit
      if (enqueued_.load(std::memory_order_acquire) != done) continue;
      std::unique_lock<std::mutex> lock(mu_);
      // seq_cst, then the count read in the predicate: pairs with enqueue's publish, then its
      // read of worker_sleeping_ (either it sees this thread asleep and wakes it under mu_, or
      // this thread sees its task).
      worker_sleeping_.store(true);
      const bool woke = work_cv_.wait_for(lock, worker_idle_exit(),
                                          [&] { return enqueued_.load() != done || stopping(); });
      worker_sleeping_.store(false, std::memory_order_relaxed);
      lock.unlock();
      if (stopping()) return;
      if (!woke && worker_should_exit(done)) return;
      continue;
    }
    busy_.store(true);
    // Between the store and the `stopping` loads below: the exiting thread sets `stopping`, then
    // reads worker_busy() (stream_registry.cpp); either it sees this worker busy or this worker
    // sees `stopping` (the relaxed loads alone would allow neither, on weakly ordered machines).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (done != published) {
      if (stopping()) {  // queued work is abandoned at exit
        busy_.store(false);
        return;
      }
      Item& item = next_queued_item();
      running_.store(item.name, std::memory_order_relaxed);
      note_worker_busy(true);  // per task, and ended before its completion is visible
      if (item.launch_ns == 0) {
        run(item);
      } else {
        run_traced(item);
      }
      note_worker_busy(false);
      item.fn = nullptr;  // destroy the captures on this thread, before signalling
      ++done;
      // seq_cst on completed_ and wake_at_ pairs with synchronize(): either the waiter sees the
      // new count or this thread sees the waiter's target.
      completed_.store(done);
      if (done >= wake_at_.load()) {
        std::lock_guard<std::mutex> wlock(mu_);
        wake_at_.store(kNoWaiter);
        done_cv_.notify_all();
      }
    }
    busy_.store(false);
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

void Stream::run_traced(Item& item) noexcept {
  // Never before its launch (CLOCK_REALTIME may step back).
  const std::int64_t start = std::max(trace_clock_ns(), item.launch_ns);
  run(item);
  const std::int64_t end = std::max(trace_clock_ns(), start);
  detail::report_task(TaskRecord{item.name, device_, id_, item.tag, item.correlation,
                                 item.launch_id, item.launch_ns, item.launch_end_ns, start, end,
                                 item.host_thread});
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
  // A device-side assert (runtime/device_assert.h): raised as one, and the device is unusable.
  if (note_task_failure(device_, name, kind, what, message)) {
    kind = ErrorKind::kDeviceAssert;
    try {
      message = "vdev error: device-side assert triggered: " + message;
    } catch (...) {
    }
  }
  errors_.push_back(TaskError{kind, std::move(message), item.origin, false});  // reserved room
  has_errors_.store(true, std::memory_order_release);
}

void Stream::request_stop() {
  // `stopping` is already set. Taking the mutex once orders that with the sleeping worker's and
  // waiters' predicate checks, which run under it: a thread that checked `stopping` before it was
  // set is now asleep on its condition variable and gets the notification below, instead of
  // missing it between its check and its wait (a lost wake-up). A worker running tasks checks
  // `stopping` before each one (worker_loop: the fence after busy_).
  {
    const std::lock_guard<std::mutex> lock(mu_);
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
}

}  // namespace vdev::rt
