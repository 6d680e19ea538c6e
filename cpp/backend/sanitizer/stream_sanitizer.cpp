#include "backend/sanitizer/stream_sanitizer.h"

#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/common/vdev_device.h"
#include "backend/memory/host_allocator.h"
#include "backend/sanitizer/allocation_numbers.h"
#include "backend/sanitizer/composite_scopes.h"
#include "backend/sanitizer/findings.h"
#include "backend/sanitizer/init_tracking.h"
#include "backend/sanitizer/race_report.h"
#include "backend/sanitizer/settings.h"
#include "backend/sanitizer/shadow_memory.h"
#include "runtime/happens_before.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

namespace hb = vdev::rt::hb;

// A view with more runs than this is recorded as its extent (approximate).
constexpr std::size_t kMaxExactRuns = 64;

struct AllocationNote {
  std::uint64_t id;
  std::size_t bytes;
  std::vector<const vdev::rt::Stream*> recorded;  // Tensor.record_stream
};

struct State {
  std::mutex mu;
  ShadowMemory shadow;                                             // guarded by mu
  std::unordered_map<std::uintptr_t, AllocationNote> allocations;  // by first byte; guarded by mu
  // What capturing streams queued, by capture id: replayed as one task (guarded by mu).
  std::unordered_map<std::uint64_t, std::vector<std::shared_ptr<const TaskNote>>> captures;
  InitTracking init;  // guarded by mu
};

State& state() {
  // Leaked (tensors are freed during interpreter teardown); its lock is a fork lock.
  static State* s =
      vdev::rt::new_leaked_with_fork_lock<State>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *s;
}

std::shared_ptr<RecordedStack> gather_stack() { return RecordedStack::gather(); }

// Calls checked as a whole running on this thread (enter_checked_host_call): the reads of host
// accesses on this thread belong to such a call.
thread_local int t_checked_host_calls = 0;

// Device memory and pinned host memory are tracked; pageable host memory is the host's alone.
bool tracked(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.numel() == 0) return false;
  if (t.storage().data() == nullptr) return false;
  if (t.device().type() == kVdev) return true;
  return t.device().is_cpu() && is_pinned_ptr(t.storage().data());
}

TensorNote note_of(const at::Tensor& t, Access access) {
  TensorNote n{
      ViewGeometry{}, t.scalar_type(), t.device(), access != Access::kRead, access, 0, 0, 0};
  n.view.base = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  n.view.sizes.assign(t.sizes().begin(), t.sizes().end());
  n.view.strides.assign(t.strides().begin(), t.strides().end());
  n.view.itemsize = t.element_size();
  if (t.device().type() == kVdev) {
    n.allocation = reinterpret_cast<std::uintptr_t>(t.storage().data());
    n.allocation_bytes = t.storage().nbytes();
  }
  return n;
}

struct Prepared {
  std::shared_ptr<TaskNote> note;
  std::vector<Access> access;
  std::vector<std::vector<ByteRange>> ranges;
  std::vector<bool> approximate;
};

// Byte ranges of a recorded view.
void add_ranges(Prepared& p, const TensorNote& t) {
  std::vector<ByteRange> r;
  const bool exact = t.view.runs(kMaxExactRuns, r);
  if (!exact) r.assign(1, t.view.extent());
  p.ranges.push_back(std::move(r));
  p.approximate.push_back(!exact);
}

// The note and byte ranges of `uses` (before the lock). Null note: nothing tracked.
Prepared prepare(const char* op, int device, std::int64_t stream, c10::ArrayRef<TensorUse> uses) {
  Prepared p;
  for (const TensorUse& u : uses) {
    if (!tracked(*u.tensor)) continue;
    if (p.note == nullptr) {
      p.note = std::make_shared<TaskNote>();
      p.note->op = op;
      p.note->device = device;
      p.note->stream = stream;
    }
    p.note->tensors.push_back(note_of(*u.tensor, u.access));
    p.access.push_back(u.access);
    add_ranges(p, p.note->tensors.back());
  }
  if (p.note != nullptr) p.note->stack = gather_stack();
  return p;
}

void fill_allocation_ids(State& st, TaskNote& note) {
  for (TensorNote& t : note.tensors) {
    if (t.allocation == 0) continue;
    auto it = st.allocations.find(t.allocation);
    if (it != st.allocations.end()) t.allocation_id = it->second.id;
  }
}

void record_locked(State& st, const Prepared& p) {
  const std::shared_ptr<const TaskNote> note = p.note;
  for (std::uint32_t t = 0; t < p.ranges.size(); ++t) {
    const AccessRecord a{note, t, p.access[t] != Access::kRead,
                         static_cast<bool>(p.approximate[t])};
    for (const ByteRange& r : p.ranges[t]) st.shadow.record(r, a);
  }
}

// Checks and records one task (the epoch is taken by `begin` under the lock); reports after the
// lock is released. `init_steps`: the parts the uninitialised-read tool checks in order (a graph
// replay's captured tasks); empty: the task itself.
template <typename Begin>
void check_and_record(Prepared& p, Begin&& begin,
                      const std::vector<Prepared>* init_steps = nullptr) {
  State& st = state();
  const bool streams = sanitizing_streams();
  const bool init = sanitizing_init();
  const bool raises = !sanitizer_warns();
  const std::uint64_t unchecked_from = init ? unchecked_allocations_from() : 0;
  std::optional<RaceReportInput> race;
  std::optional<InitFinding> uninitialized;
  std::shared_ptr<const TaskNote> uninitialized_task = p.note;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    fill_allocation_ids(st, *p.note);
    if (init && init_steps == nullptr) {
      uninitialized = st.init.check_and_mark(*p.note, p.access, p.ranges, p.approximate, raises,
                                             unchecked_from);
    } else if (init) {
      for (const Prepared& step : *init_steps) {
        uninitialized = st.init.check_and_mark(*step.note, step.access, step.ranges,
                                               step.approximate, raises, unchecked_from);
        if (uninitialized) {
          uninitialized_task = step.note;
          break;
        }
      }
    }
    if (uninitialized && raises) {
      // Reported below; nothing of this task is recorded (it is not queued).
    } else if (streams) {
      hb::Clock clock;
      p.note->epoch = begin(clock);
      std::vector<Conflict> conflicts;
      st.shadow.find_conflicts(*p.note, p.ranges, p.approximate, clock, conflicts);
      if (!conflicts.empty()) race = RaceReportInput{conflicts.front(), p.note};
      if (conflicts.empty() || sanitizer_warns()) record_locked(st, p);
    }
  }
  if (uninitialized) {
    report_finding(FindingKind::kUninitializedRead,
                   format_init_report(*uninitialized, *uninitialized_task));
  }
  if (race) report_finding(FindingKind::kDataRace, format_race_report(*race));
}

}  // namespace

void sanitize_queued(vdev::rt::Stream& stream, const char* op, c10::ArrayRef<TensorUse> uses) {
  Prepared p = prepare(op, stream.device(), stream.id(), uses);
  if (p.note == nullptr) return;
  if (stream.capture_id() != 0) {
    // Runs at each replay, not now: kept for sanitize_replay. (The uninitialised-read tool sees
    // it at replay too.)
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    st.captures[stream.capture_id()].push_back(p.note);
    return;
  }
  check_and_record(p, [&](hb::Clock& clock) { return hb::begin_stream_task(stream, clock); });
}

void enter_checked_host_call() noexcept { ++t_checked_host_calls; }
void leave_checked_host_call() noexcept { --t_checked_host_calls; }

void sanitize_host_access(const char* op, c10::ArrayRef<TensorUse> uses) {
  if (vdev::rt::in_bad_fork()) return;  // a forked child uses no device: nothing to order
  std::vector<TensorUse> writes;
  if (t_checked_host_calls > 0) {
    for (const TensorUse& u : uses) {
      if (u.access != Access::kRead) writes.push_back(u);
    }
    uses = writes;
  }
  Prepared p = prepare(op, -1, -1, uses);
  if (p.note == nullptr) return;
  check_and_record(p, [](hb::Clock& clock) { return hb::begin_host_access(clock); });
}

void sanitize_replay(vdev::rt::Stream& stream, std::uint64_t capture_id) {
  if (!sanitizing_accesses()) return;
  Prepared p;
  std::vector<Prepared> steps;  // each captured task, for the uninitialised-read tool
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.captures.find(capture_id);
    if (it == st.captures.end()) return;
    if (const std::uint64_t outer = stream.capture_id(); outer != 0) {
      // Replayed inside another capture: part of that graph, checked at its replays.
      std::vector<std::shared_ptr<const TaskNote>>& into = st.captures[outer];
      const std::vector<std::shared_ptr<const TaskNote>> inner = st.captures[capture_id];
      into.insert(into.end(), inner.begin(), inner.end());
      return;
    }
    p.note = std::make_shared<TaskNote>();
    p.note->op = "graph replay";
    p.note->device = stream.device();
    p.note->stream = stream.id();
    for (const auto& captured : it->second) {
      Prepared step;
      step.note = std::const_pointer_cast<TaskNote>(captured);  // never modified: ids are set
      for (const TensorNote& t : captured->tensors) {
        p.note->tensors.push_back(t);
        p.access.push_back(t.write ? Access::kReadWrite : Access::kRead);
        step.access.push_back(t.access);
      }
      steps.push_back(std::move(step));
    }
  }
  if (p.note->tensors.empty()) return;
  for (const TensorNote& t : p.note->tensors) add_ranges(p, t);
  for (Prepared& step : steps) {
    for (const TensorNote& t : step.note->tensors) add_ranges(step, t);
  }
  p.note->stack = gather_stack();
  check_and_record(
      p, [&](hb::Clock& clock) { return hb::begin_stream_task(stream, clock); }, &steps);
}

void forget_capture(std::uint64_t capture_id) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.captures.erase(capture_id);
}

void sanitizer_allocated(void* ptr, std::size_t bytes, const vdev::rt::Stream& stream) {
  (void)stream;
  // The allocating stack, for the uninitialised-read report (gathered before the lock).
  std::shared_ptr<RecordedStack> stack = sanitizing_init() ? gather_stack() : nullptr;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto at = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uint64_t id = take_allocation_number();
  st.allocations[at] = AllocationNote{id, bytes, {}};
  if (sanitizing_init()) st.init.allocated(at, bytes, id, std::move(stack));
}

bool sanitizer_freed(void* ptr) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto at = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = st.allocations.find(at);
  if (it == st.allocations.end()) return false;
  const AllocationNote& a = it->second;
  const bool recorded = !a.recorded.empty();
  if (!a.recorded.empty()) {
    // The allocator reuses the block only once the recorded streams' work queued before this free
    // has finished: their accesses cannot conflict with the next owner's.
    std::unordered_set<std::uint32_t> slots;
    for (const vdev::rt::Stream* s : a.recorded) slots.insert(hb::slot_of(*s));
    st.shadow.forget({at, at + a.bytes},
                     [&](const AccessRecord& r) { return slots.count(r.epoch().slot) != 0; });
  }
  st.init.freed(at);
  st.allocations.erase(it);
  return recorded;
}

void sanitizer_recorded_stream(void* ptr, const vdev::rt::Stream& stream) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it != st.allocations.end()) it->second.recorded.push_back(&stream);
}

void sanitizer_forget_range(void* ptr, std::size_t bytes) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto at = reinterpret_cast<std::uintptr_t>(ptr);
  st.shadow.forget({at, at + bytes}, [](const AccessRecord&) { return true; });
}

void sanitizer_host_wrote(void* ptr, std::size_t bytes) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.init.mark_written(reinterpret_cast<std::uintptr_t>(ptr), bytes);
}

void forget_sanitizer_state() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.shadow.clear();
  st.captures.clear();
  st.init.clear();
}

std::size_t sanitizer_shadow_cells() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.shadow.cell_count();
}

}  // namespace vdev::backend
