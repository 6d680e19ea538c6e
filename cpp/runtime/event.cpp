#include "runtime/event.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "runtime/capture.h"
#include "runtime/errors.h"
#include "runtime/happens_before.h"
#include "runtime/machine_load.h"
#include "runtime/process.h"
#include "runtime/task_trace.h"

namespace vdev::rt {

struct Mark {
  std::atomic<bool> done{false};
  std::mutex mu;
  std::condition_variable cv;
  std::chrono::steady_clock::time_point time;  // written before `done` is released
  // The error pending on the stream when it completed, with its kind; written before `done`.
  std::optional<std::pair<ErrorKind, std::string>> error;
  // Recorded on a stream that captured a graph (runtime/capture.h): never completes; a
  // dependency inside the capture while it lasts, and inert once it has ended.
  std::shared_ptr<Capture> capture;
  CaptureClock clock;
  // The recording stream's happens-before clock (runtime/happens_before.h), while tracked.
  hb::ClockPtr hb_clock;

  void complete(std::optional<std::pair<ErrorKind, std::string>> err) {
    {
      std::lock_guard<std::mutex> lock(mu);
      time = std::chrono::steady_clock::now();
      error = std::move(err);
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }

  // Waits for completion; returns false if the process began exiting first.
  bool wait() {
    if (done.load(std::memory_order_acquire)) return true;
    const DeviceWait waiting(on_stream_worker());  // runtime/machine_load.h
    const auto spin_end = std::chrono::steady_clock::now() + kHostSpin;
    while (std::chrono::steady_clock::now() < spin_end) {
      if (done.load(std::memory_order_acquire)) return true;
    }
    std::unique_lock<std::mutex> lock(mu);
    while (!done.load(std::memory_order_acquire)) {
      if (stopping()) return false;
      // Poll `stopping` so that exit never waits on a mark that will not complete.
      cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    return true;
  }
};

Event::Event(bool timing) : timing_(timing) {}

int Event::device() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_;
}

std::shared_ptr<Mark> Event::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Event::record(Stream& stream) {
  auto mark = std::make_shared<Mark>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (device_ != -1 && device_ != stream.device()) {
      fail<std::invalid_argument>("record_event", "event belongs to vdev:", device_,
                                  " and cannot be recorded on a stream of vdev:", stream.device());
    }
    device_ = stream.device();  // claimed before queueing, so two recorders cannot disagree
  }
  if (std::shared_ptr<Capture> c = capture_of(stream)) {
    mark->clock = detail::mark_clock(*c, stream);
    mark->capture = std::move(c);
  } else {
    mark->hb_clock = hb::clock_of(stream);
    Stream* s = &stream;
    stream.enqueue(
        "record_event", [mark, s] { mark->complete(s->peek_error()); },
        TaskTag{TaskKind::kEventRecord});
  }
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(mark);
}

namespace {
// For an operation on the host that would wait for a captured mark: fails while its capture lasts
// (true: the mark is inert, the operation has nothing to wait for).
bool captured_mark_is_inert(const Mark& m, const char* operation) {
  if (m.capture == nullptr) return false;
  if (detail::ended(*m.capture)) return true;
  fail_capture(*m.capture, operation,
               "the event was recorded on a stream that is capturing a graph; its work is only "
               "recorded, so it cannot be queried or waited for on the host");
}
}  // namespace

bool Event::query() const {
  auto m = latest();
  if (m == nullptr) return true;
  if (captured_mark_is_inert(*m, "Event.query")) return true;
  const bool done = m->done.load(std::memory_order_acquire);
  if (done) hb::host_learns(m->hb_clock);
  return done;
}

void Event::synchronize() const {
  auto m = latest();
  if (m == nullptr) return;
  if (captured_mark_is_inert(*m, "Event.synchronize")) return;
  const std::int64_t start = task_tracing() ? trace_clock_ns() : 0;
  const bool done = m->wait();
  if (start != 0) report_host_call("vdevEventSynchronize", -1, -1, start);
  park_if_stray_at_exit();  // a daemon thread must not go back to Python at exit
  if (!done) fail<std::runtime_error>("synchronize_event", "the vdev runtime is shutting down");
  hb::host_learns(m->hb_clock);
  if (m->error) {
    throw_error(m->error->first, detail::cat("[synchronize_event] event recorded after a failed "
                                             "operation: ",
                                             m->error->second));
  }
}

void Event::block(Stream& stream) const {
  auto m = latest();
  if (m == nullptr) return;
  std::shared_ptr<Capture> own = capture_of(stream);
  if (m->capture != nullptr) {  // a dependency inside a capture: nothing is queued
    if (own == m->capture) {
      detail::merge_clock(*own, stream, m->clock);
    } else if (own != nullptr) {
      fail_capture(*own, "wait_event",
                   detail::cat("vdev:", stream.device(), " stream ", stream.id(),
                               " captures a graph and cannot wait on an event recorded in "
                               "another capture"));
    } else if (!join_capture(stream, m->capture, m->clock)) {
      fail_capture(*m->capture, "wait_event",
                   detail::cat("vdev:", stream.device(), " stream ", stream.id(),
                               " began another capture while joining this one"));
    }
    return;
  }
  if (own != nullptr && device() != stream.device()) {
    fail_capture(*own, "wait_event",
                 detail::cat("vdev:", stream.device(), " stream ", stream.id(),
                             " is capturing a graph and cannot wait on work of vdev:", device(),
                             ": a graph captures the work of one device (an operation that "
                             "involves another device cannot be captured)"));
  }
  if (own != nullptr) {
    fail_capture(*own, "wait_event",
                 detail::cat("vdev:", stream.device(), " stream ", stream.id(),
                             " is capturing a graph and cannot wait on an event recorded outside "
                             "the capture (a dependency may not cross the capture's boundary; "
                             "make the stream wait before capture_begin)"));
  }
  stream.enqueue(
      "wait_event",
      [m] {
        if (!m->wait()) return;  // exiting
        if (m->error) {
          throw_error(m->error->first,
                      "waited on an event recorded after a failed operation: " + m->error->second);
        }
      },
      TaskTag{TaskKind::kEventWait});
  hb::stream_learns(stream, m->hb_clock);
}

double Event::elapsed_ms(const Event& end) const {
  if (!timing_ || !end.timing_) {
    fail<std::invalid_argument>("elapsed_time",
                                "both events must be created with enable_timing=True");
  }
  auto a = latest();
  auto b = end.latest();
  if (a == nullptr || b == nullptr) {
    fail<std::invalid_argument>("elapsed_time",
                                "both events must be recorded before calculating elapsed time");
  }
  if (device() != end.device()) {
    fail<std::invalid_argument>("elapsed_time", "events are on different devices: vdev:", device(),
                                " and vdev:", end.device());
  }
  if (!a->done.load(std::memory_order_acquire) || !b->done.load(std::memory_order_acquire)) {
    fail<std::runtime_error>("elapsed_time",
                             "both events must be completed before calculating elapsed time");
  }
  return std::chrono::duration<double, std::milli>(b->time - a->time).count();
}

}  // namespace vdev::rt
