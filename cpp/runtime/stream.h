// A stream of the simulated driver: a FIFO of tasks run in order by its own worker thread, and the
// errors of those tasks. Which streams exist, and which is current, is the registry's
// (runtime/stream_registry.h).
//
// Execution: the worker starts on the first enqueue (an unused stream costs no thread) and exits
// after worker_idle_exit() without work (the next enqueue starts it again). A worker that runs out
// of work spins for at most kWorkerSpin before sleeping, so back-to-back work is picked up in well
// under a microsecond without burning a core when idle.
//
// The queue: a list of chunks of kChunkItems tasks. Host threads append under push_mu_, a lock
// the worker never takes while it runs (only to exit when idle), and publish each task by
// advancing enqueued_; the worker runs tasks [completed_, enqueued_) in order without a lock. Why:
// a small operator is queued every microsecond or two while the worker runs the previous one, and
// a lock both threads take per task (with a deque beside it) moved their cache lines between the
// cores at every task. Measured with benchmarks/cpp/bench_streams.cpp against the locked deque,
// interleaved: enqueue-to-complete round trip 0.38-0.42 -> 0.23-0.26 us, empty tasks per second
// 5.6-8.0 M -> 6.1-13.5 M. Finished chunks go back to the producers through one spare slot.
//
// Completion: query() is true when every task enqueued so far has finished (not when the queue is
// empty). synchronize() waits for exactly the tasks enqueued before it was called.
//
// VDEV_LAUNCH_BLOCKING=1 (runtime/config.h) makes enqueue() wait for the task, so its error is
// thrown by the enqueue of the operation that caused it.
//
// Errors: a task that throws never kills the worker. Its error is kept with its kind (IndexError,
// ValueError, ... : runtime/errors.h) and thrown on the host by a later synchronize() or enqueue()
// on that stream (the enqueued task is then not queued), as the same kind of exception with the
// message "[op] message (on vdev:D stream S)". Errors of later tasks are not dropped: the one
// thrown lists them after the first (up to kMaxKeptErrors kept, then a count). Later tasks still
// run. Delivery, as close to CUDA's sticky errors as a simulator that must keep working can be:
// each error is thrown once to the first thread that synchronizes or queues on the stream, and
// once more to the thread that queued the failing task, if that was another thread (so the
// thread that queued it always learns of it, whoever looked first); then it is gone. At exit,
// errors no thread was told of are printed to stderr (runtime/stream_registry.h). Events recorded
// after the failure carry it, with its kind, to the streams and threads that wait on them
// (runtime/event.h).
//
// Graph capture: a stream in capture mode hands its tasks to a TaskRecorder (implemented by
// runtime/capture.h) instead of its worker; the stream knows only that interface.
//
// Ownership and lifetime: streams are made by the registry and never destroyed (leaked on purpose:
// workers may outlive static destruction at exit, see runtime/process.h). Stream& references stay
// valid for the life of the process. A task's captures are destroyed on the worker thread right
// after it runs, before its completion is signalled. What queued work may hold is decided by the
// layers above (the backend's tasks hold no device memory: its caching allocator orders reuse by
// streams).
//
// Thread rules: every member is safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/errors.h"
#include "runtime/export.h"
#include "runtime/task_trace.h"

namespace vdev::rt {

inline constexpr std::chrono::microseconds kWorkerSpin{20};
inline constexpr std::chrono::microseconds kHostSpin{20};
inline constexpr std::chrono::seconds kWorkerIdleExit{5};

// How long an idle worker waits for work before its thread exits: kWorkerIdleExit, unless a test
// shortened it (set_worker_idle_exit), to make workers exit and start again often.
VDEV_RT_API std::chrono::milliseconds worker_idle_exit() noexcept;
VDEV_RT_API void set_worker_idle_exit(std::chrono::milliseconds wait) noexcept;

using TaskFn = std::function<void()>;

class Stream;
// A stream's knowledge of the members of its capture (runtime/capture.h).
using CaptureClock = std::vector<std::pair<const Stream*, std::uint64_t>>;

// What a stream in capture mode hands its work to. Implemented by the graph capture
// (runtime/capture.h), which owns the recorder; the member streams share it while they capture.
class TaskRecorder {
 public:
  // Unique in the process, never 0.
  virtual std::uint64_t id() const noexcept = 0;
  // Records a task queued on member stream `s`; throws if the capture was invalidated.
  virtual void record(const Stream& s, const char* name, TaskFn fn, TaskTag tag) = 0;
  // Stream `s` (not capturing; its mutex held by Stream::join_capture) joins with `clock`; throws
  // if the recorder belongs to another device. False if the capture has already ended.
  virtual bool add_member(const Stream& s, const CaptureClock& clock) = 0;
  // Invalidates the capture with `reason` and throws std::runtime_error naming `operation`.
  [[noreturn]] virtual void invalidate_and_throw(const char* operation,
                                                 const std::string& reason) = 0;
  virtual ~TaskRecorder() = default;
};

// Whether the calling thread is a stream's worker (running queued work, not the host).
VDEV_RT_API bool on_stream_worker() noexcept;

class VDEV_RT_API Stream {
 public:
  Stream(int device, std::int64_t id, int priority);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  std::int64_t id() const { return id_; }
  int priority() const { return priority_; }

  // Queues `fn`. `name` names the operation in error messages; it must outlive the task (a string
  // literal, or a name interned for the process: the backend interns operator names). `tag` says
  // what the task is, for the task observers (runtime/task_trace.h). Throws the
  // stream's pending error instead of queueing, and std::runtime_error in a bad fork or at exit.
  // While the stream captures a graph, `fn` is handed to the recorder instead of queued.
  void enqueue(const char* name, TaskFn fn, TaskTag tag = {});
  // True when every task enqueued so far has finished. Never throws.
  bool query() const noexcept;
  // Waits for the tasks enqueued before this call, then throws the pending error, if any, and
  // then the device's device-side assert (runtime/device_assert.h) unless `device_assert` is
  // false (a device-wide synchronize raises that once, not per stream). Fails (invalidating the
  // capture) while the stream captures a graph.
  void synchronize(bool device_assert = true);
  // The pending error without consuming it (events use it to carry errors).
  std::optional<std::pair<ErrorKind, std::string>> peek_error() const;
  // Every pending error, as the next synchronize would throw them, without consuming them.
  std::optional<std::string> unreported_errors() const;
  // Number of tasks enqueued / finished so far. A pair (stream, enqueued_count()) is a fence: the
  // work queued before it has finished once completed_count() reaches it (the caching allocator
  // uses fences to know when a block used on another stream may be reused).
  std::uint64_t enqueued_count() const noexcept { return enqueued_.load(); }
  std::uint64_t completed_count() const noexcept { return completed_.load(); }
  // Waits until completed_count() >= count (or process exit), without throwing the pending
  // error: for callers that must wait for memory, not report errors.
  // `park_strays`: a daemon thread parks when the wait ends at exit (runtime/process.h); without
  // it the wait returns, and the caller parks it once it holds no lock.
  void wait_for(std::uint64_t count, bool park_strays = true) noexcept;

  // Graph capture (runtime/capture.h). capture_id() is 0 when the stream does not capture;
  // lock-free, for hot paths (the caching allocator asks it at every allocation).
  std::uint64_t capture_id() const noexcept { return capture_id_.load(std::memory_order_acquire); }
  std::shared_ptr<TaskRecorder> capture() const;
  // Throws std::runtime_error naming `operation`, and invalidates the capture, if the stream
  // captures: for operations that would have to wait for captured work (Stream.query).
  void check_not_capturing(const char* operation);
  // For runtime/capture.cpp: enters capture mode (false if the stream already captures) / leaves
  // it (if it still captures `c`).
  bool attach_capture(std::shared_ptr<TaskRecorder> c);
  // Joins `c` (a wait on an event recorded in it), atomically with respect to its end: false if
  // the stream already captures; a no-op if `c` has ended.
  bool join_capture(const std::shared_ptr<TaskRecorder>& c, const CaptureClock& clock);
  void detach_capture(const TaskRecorder* c) noexcept;

  // Process exit: wakes the worker so that it stops after its current task (worker_busy() tells
  // whether it is still running one).
  void request_stop();
  bool worker_busy() const noexcept { return busy_.load(); }
  // Whether a worker thread serves the stream now, and how many were started so far (tests).
  bool worker_running() const;
  std::uint64_t worker_starts() const;
  // The name of the task the worker runs or ran last ("" before the first).
  const char* running_task() const noexcept { return running_.load(std::memory_order_relaxed); }

 private:
  struct Item {
    const char* name = "";
    TaskFn fn;
    std::thread::id origin;  // the thread that queued it: it always learns of its error
    // For the task observers (runtime/task_trace.h); launch_ns == 0: not traced.
    TaskTag tag;
    std::uint32_t launch_id = 0;
    std::int64_t launch_ns = 0, launch_end_ns = 0;
    std::uint64_t correlation = 0;
    std::uint64_t host_thread = 0;
  };
  struct TaskError {
    ErrorKind kind;
    std::string message;
    std::thread::id origin;
    bool reported;  // raised on some thread (not its origin): not raised again elsewhere
  };
  static constexpr std::size_t kChunkItems = 64;
  struct Chunk {
    Item items[kChunkItems];
    std::atomic<Chunk*> next{nullptr};  // linked by the producer before it publishes items in it
  };
  void start_worker_locked();         // push_mu_ held
  Item& next_free_slot_locked();      // push_mu_ held; may allocate a chunk (throws bad_alloc)
  Item& next_queued_item() noexcept;  // worker only; the item at completed_ (published)
  void worker_loop();
  bool worker_should_exit(std::uint64_t done) noexcept;  // after worker_idle_exit() idle
  void run(Item& item) noexcept;                         // runs one task, keeping its error
  void run_traced(Item& item) noexcept;                  // the same, reported to the task observer
  void throw_pending_error_locked(std::unique_lock<std::mutex>& lock);
  // The message raised for `errors` (not empty): the first, then the later ones, then a count.
  std::string errors_message_locked(const std::vector<const TaskError*>& errors,
                                    std::size_t not_kept) const;
  void keep_error(ErrorKind kind, const Item& item, const char* what) noexcept;

  const int device_;
  const std::int64_t id_;
  const int priority_;

  // Written by host threads per task (the worker reads enqueued_): one cache line.
  alignas(64) mutable std::mutex push_mu_;
  Chunk* tail_ = nullptr;                   // guarded by push_mu_; the chunk being filled
  std::size_t tail_used_ = 0;               // guarded by push_mu_; items of tail_ handed out
  bool worker_running_ = false;             // guarded by push_mu_
  std::uint64_t worker_starts_ = 0;         // guarded by push_mu_
  std::atomic<std::uint64_t> enqueued_{0};  // written under push_mu_

  // Written by the worker per task: another line, so that the two threads do not share one.
  alignas(64) std::atomic<std::uint64_t> completed_{0};
  Chunk* head_ = nullptr;      // worker only (handed to the next worker under push_mu_)
  std::size_t head_used_ = 0;  // worker only; items of head_ taken
  std::atomic<bool> busy_{false};
  std::atomic<const char*> running_{""};

  // Read per task, written rarely.
  alignas(64) std::atomic<std::uint64_t> capture_id_{0};  // written under mu_
  std::atomic<bool> has_errors_{false};                   // !errors_.empty(), written under mu_
  std::atomic<bool> worker_sleeping_{false};              // written by the worker under mu_
  static constexpr std::uint64_t kNoWaiter = ~std::uint64_t{0};
  // Lowest completion count a sleeping host waiter needs (kNoWaiter: none).
  std::atomic<std::uint64_t> wake_at_{kNoWaiter};
  std::atomic<Chunk*> spare_{nullptr};  // a finished chunk, for the next one a producer needs

  alignas(64) mutable std::mutex mu_;  // errors, capture, sleeping and waking
  std::condition_variable work_cv_;    // the worker waits for work
  std::condition_variable done_cv_;    // host threads wait for completion
  static constexpr std::size_t kMaxKeptErrors = 8;
  std::vector<TaskError> errors_;  // guarded by mu_; the first kMaxKeptErrors since the last throw
  std::size_t errors_not_kept_ = 0;        // guarded by mu_
  std::shared_ptr<TaskRecorder> capture_;  // guarded by mu_; set while the stream captures
};

}  // namespace vdev::rt
