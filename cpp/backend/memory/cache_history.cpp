#include "backend/memory/cache_history.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "runtime/process.h"

namespace vdev::backend {

void TraceRing::configure(std::size_t max_entries, bool clear_entries) {
  if (clear_entries) clear();
  max_entries = std::max<std::size_t>(1, max_entries);
  if (entries_.size() > max_entries) {  // keep the newest
    std::vector<TraceEntry> ordered = entries();
    ordered.erase(ordered.begin(), ordered.end() - static_cast<std::ptrdiff_t>(max_entries));
    entries_ = std::move(ordered);
    next_ = 0;
  } else if (next_ != 0) {  // full and wrapped: unwrap, so that growing appends after the newest
    entries_ = entries();
    next_ = 0;
  }
  max_ = max_entries;
}

void TraceRing::add(TraceEntry entry) {
  if (entries_.size() < max_) {
    entries_.push_back(std::move(entry));
    return;
  }
  entries_[next_] = std::move(entry);
  next_ = (next_ + 1) % max_;
}

std::vector<TraceEntry> TraceRing::entries() const {
  std::vector<TraceEntry> out;
  out.reserve(entries_.size());
  out.insert(out.end(), entries_.begin() + static_cast<std::ptrdiff_t>(next_), entries_.end());
  out.insert(out.end(), entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(next_));
  return out;
}

void TraceRing::clear() {
  entries_.clear();
  next_ = 0;
}

std::int64_t trace_time_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

struct Observers {
  std::mutex mu;
  std::vector<OutOfMemoryObserver> list;
};

Observers& observers() {
  // Leaked (an allocation may fail during interpreter teardown); a leaf lock for fork: it is taken
  // with no allocator lock held and holds nothing else.
  static auto* o =
      vdev::rt::new_leaked_with_fork_lock<Observers>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *o;
}

}  // namespace

void attach_out_of_memory_observer(OutOfMemoryObserver observer) {
  std::lock_guard<std::mutex> lock(observers().mu);
  observers().list.push_back(std::move(observer));
}

std::vector<OutOfMemoryObserver> out_of_memory_observers() {
  std::lock_guard<std::mutex> lock(observers().mu);
  return observers().list;
}

}  // namespace vdev::backend
