#include "runtime/capture.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "runtime/errors.h"
#include "runtime/process.h"

namespace vdev::rt {

namespace {
const char* mode_name(CaptureMode m) {
  switch (m) {
    case CaptureMode::kGlobal:
      return "global";
    case CaptureMode::kThreadLocal:
      return "thread_local";
    case CaptureMode::kRelaxed:
      return "relaxed";
  }
  return "?";
}
}  // namespace

// The only TaskRecorder (runtime/stream.h): member streams hand it their tasks.
class Capture final : public TaskRecorder {
 public:
  Capture(std::uint64_t id, Stream& origin, CaptureMode mode)
      : id_(id),
        device_(origin.device()),
        origin_(&origin),
        mode_(mode),
        thread_(std::this_thread::get_id()) {
    members_.push_back(Member{&origin, 0, {}});
  }

  struct Member {
    Stream* stream;
    std::uint64_t count;  // tasks recorded on it
    CaptureClock clock;   // what it has waited for
  };

  const std::uint64_t id_;
  const int device_;
  Stream* const origin_;
  const CaptureMode mode_;
  const std::thread::id thread_;

  mutable std::mutex mu_;
  std::vector<Member> members_;      // guarded by mu_; the origin first
  std::vector<CapturedTask> tasks_;  // guarded by mu_
  std::string invalidated_;          // guarded by mu_; the reason, empty while valid
  bool ended_ = false;               // guarded by mu_

  Member& member_locked(const Stream& s) {
    for (Member& m : members_) {
      if (m.stream == &s) return m;
    }
    throw std::logic_error("vdev: stream is not a member of the capture");  // a runtime bug
  }

  std::string where() const {
    return detail::cat("the graph capture on vdev:", device_, " stream ", origin_->id());
  }

  std::uint64_t id() const noexcept override { return id_; }
  void record(const Stream& s, const char* name, TaskFn fn, TaskTag tag) override {
    detail::record_task(*this, s, name, std::move(fn), tag);
  }
  bool add_member(const Stream& s, const CaptureClock& clock) override {
    return detail::add_member(*this, s, clock);
  }
  [[noreturn]] void invalidate_and_throw(const char* operation,
                                         const std::string& reason) override {
    fail_capture(*this, operation, reason);
  }

  void throw_if_invalid_locked(const char* operation) const {
    if (ended_) fail<std::runtime_error>(operation, where(), " has ended");  // a runtime bug
    if (invalidated_.empty()) return;
    fail<std::runtime_error>(operation, where(), " was invalidated by an earlier error (",
                             invalidated_,
                             "); nothing more is recorded: end it with capture_end() and "
                             "capture again");
  }
};

namespace {

std::atomic<std::uint64_t> next_capture_id{1};

// Captures in progress, for check_capture_permits (leaked: used until exit).
struct ActiveCaptures {
  std::mutex mu;
  std::vector<std::shared_ptr<Capture>> all;
  std::atomic<int> count{0};
};
ActiveCaptures& active() {
  static auto* a = [] {
    auto* r = new ActiveCaptures;
    register_fork_lock(&r->mu, ForkLockLevel::kStreamTable);
    return r;
  }();
  return *a;
}

void merge_into(CaptureClock& into, const CaptureClock& from) {
  for (const auto& [s, n] : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const auto& e) { return e.first == s; });
    if (it == into.end()) {
      into.emplace_back(s, n);
    } else {
      it->second = std::max(it->second, n);
    }
  }
}

// Marks the capture invalid if it is still active (the first reason wins).
void invalidate(Capture& c, const std::string& reason) {
  std::lock_guard<std::mutex> lock(c.mu_);
  if (!c.ended_ && c.invalidated_.empty()) c.invalidated_ = reason;
}

}  // namespace

std::shared_ptr<Capture> begin_capture(Stream& origin, CaptureMode mode) {
  auto c = std::make_shared<Capture>(next_capture_id.fetch_add(1), origin, mode);
  ActiveCaptures& a = active();
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.all.reserve(a.all.size() + 1);  // nothing can fail once the stream captures
  }
  if (!origin.attach_capture(c)) {
    fail<std::runtime_error>("capture_begin", "vdev:", origin.device(), " stream ", origin.id(),
                             " is already capturing a graph");
  }
  std::lock_guard<std::mutex> lock(a.mu);
  a.all.push_back(c);
  a.count.fetch_add(1);
  return c;
}

std::vector<CapturedTask> end_capture(Capture& c, Stream& stream) {
  if (&stream != c.origin_) {
    fail<std::runtime_error>(
        "capture_end", "a capture must end on the stream it began on: ", c.where(),
        " cannot end on vdev:", stream.device(), " stream ", stream.id(), " (the capture goes on)");
  }
  std::vector<Stream*> members;
  {
    std::lock_guard<std::mutex> lock(c.mu_);
    members.reserve(c.members_.size());  // may throw: before anything changes
    for (const Capture::Member& m : c.members_) members.push_back(m.stream);
    c.ended_ = true;
  }
  for (Stream* s : members) s->detach_capture(&c);
  {
    ActiveCaptures& a = active();
    std::lock_guard<std::mutex> lock(a.mu);
    auto it =
        std::find_if(a.all.begin(), a.all.end(), [&](const auto& p) { return p.get() == &c; });
    if (it != a.all.end()) {
      a.all.erase(it);
      a.count.fetch_sub(1);
    }
  }
  std::lock_guard<std::mutex> lock(c.mu_);
  if (!c.invalidated_.empty()) {
    c.tasks_.clear();  // marks may keep the Capture alive: not what its tasks hold
    fail<std::runtime_error>("capture_end", c.where(), " failed: it was invalidated by ",
                             c.invalidated_, ". The streams have left capture mode");
  }
  const Capture::Member& origin = c.members_.front();
  for (const Capture::Member& m : c.members_) {
    if (m.stream == c.origin_ || m.count == 0) continue;
    std::uint64_t known = 0;
    for (const auto& [s, n] : origin.clock) {
      if (s == m.stream) known = n;
    }
    if (known < m.count) {
      c.tasks_.clear();
      fail<std::runtime_error>(
          "capture_end", c.where(), " failed: vdev:", m.stream->device(), " stream ",
          m.stream->id(), " joined the capture and its last ", m.count - known,
          " operation(s) were not joined back into the capturing stream (record an event on it "
          "after its last operation and make the capturing stream wait on it, e.g. "
          "capture_stream.wait_stream(side_stream)). The streams have left capture mode");
    }
  }
  return std::move(c.tasks_);
}

std::uint64_t capture_id(const Capture& c) noexcept { return c.id_; }

bool join_capture(Stream& s, const std::shared_ptr<Capture>& c, const CaptureClock& clock) {
  return s.join_capture(c, clock);
}

std::shared_ptr<Capture> capture_of(const Stream& s) {
  return std::static_pointer_cast<Capture>(s.capture());  // Capture is the only TaskRecorder
}

void fail_capture(Capture& c, const char* operation, const std::string& reason) {
  invalidate(c, detail::cat(operation, ": ", reason));
  fail<std::runtime_error>(operation, reason, " (", c.where(),
                           " is now invalidated: end it with capture_end() and capture again)");
}

void check_capture_permits(const char* operation) {
  ActiveCaptures& a = active();
  if (a.count.load(std::memory_order_acquire) == 0) return;
  std::shared_ptr<Capture> conflict;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    const std::thread::id me = std::this_thread::get_id();
    for (const auto& c : a.all) {
      if (c->mode_ == CaptureMode::kGlobal ||
          (c->mode_ == CaptureMode::kThreadLocal && c->thread_ == me)) {
        conflict = c;
        break;
      }
    }
  }
  if (conflict == nullptr) return;
  const bool same_thread = conflict->thread_ == std::this_thread::get_id();
  fail_capture(
      *conflict, operation,
      detail::cat(operation, " is not permitted while vdev:", conflict->device_, " stream ",
                  conflict->origin_->id(),
                  " captures a graph with "
                  "capture_error_mode=\"",
                  mode_name(conflict->mode_), "\"", same_thread ? "" : " on another thread",
                  " (it would wait for or release memory of work that is only "
                  "recorded; \"relaxed\" permits it)"));
}

int active_captures() noexcept { return active().count.load(std::memory_order_acquire); }

namespace detail {

void record_task(Capture& c, const Stream& s, const char* name, TaskFn fn, TaskTag tag) {
  std::lock_guard<std::mutex> lock(c.mu_);
  c.throw_if_invalid_locked(name);
  c.member_locked(s).count += 1;
  c.tasks_.push_back(CapturedTask{name, s.id(), std::move(fn), tag});
}

CaptureClock mark_clock(Capture& c, const Stream& s) {
  std::lock_guard<std::mutex> lock(c.mu_);
  c.throw_if_invalid_locked("record_event");
  Capture::Member& m = c.member_locked(s);
  CaptureClock clock = m.clock;
  merge_into(clock, {{&s, m.count}});
  return clock;
}

void merge_clock(Capture& c, const Stream& s, const CaptureClock& clock) {
  std::lock_guard<std::mutex> lock(c.mu_);
  c.throw_if_invalid_locked("wait_event");
  merge_into(c.member_locked(s).clock, clock);
}

bool add_member(Capture& c, const Stream& s, const CaptureClock& clock) {
  {
    std::lock_guard<std::mutex> lock(c.mu_);
    if (c.ended_) return false;
    c.throw_if_invalid_locked("wait_event");
    if (s.device() == c.device_) {
      c.members_.push_back(Capture::Member{const_cast<Stream*>(&s), 0, clock});
      return true;
    }
  }
  fail_capture(c, "wait_event",
               detail::cat("vdev:", s.device(), " stream ", s.id(),
                           " cannot join a graph capture of vdev:", c.device_,
                           ": a graph captures the work of one device"));
}

bool ended(const Capture& c) noexcept {
  std::lock_guard<std::mutex> lock(c.mu_);
  return c.ended_;
}

}  // namespace detail
}  // namespace vdev::rt
