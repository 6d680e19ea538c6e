#include "backend/common/launch.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace vdev::backend {

namespace detail {
std::atomic<const LaunchObservers*> g_launch_observers{nullptr};
}  // namespace detail

namespace {

std::mutex& observers_mutex() {
  static std::mutex mu;
  return mu;
}

// Every array ever installed, kept reachable: the arrays are never freed, since a thread may still
// read one it loaded before it was replaced (installing and removing observers is rare: a switch
// of the tools). Leaked with the process; guarded by observers_mutex().
std::vector<void*>& arrays_made() {
  static auto* made = new std::vector<void*>;
  return *made;
}

// A new array of `count` observers (called with observers_mutex() held).
detail::LaunchObservers* new_observers(std::size_t count) {
  const std::size_t bytes =
      sizeof(detail::LaunchObservers) + (count > 1 ? count - 1 : 0) * sizeof(LaunchObserver*);
  arrays_made().reserve(arrays_made().size() + 1);  // first: nothing to undo after the block
  void* block = std::malloc(bytes);
  if (block == nullptr) throw std::bad_alloc();
  arrays_made().push_back(block);
  auto* set = new (block) detail::LaunchObservers;
  set->count = count;
  return set;
}

}  // namespace

std::uint64_t most_elements(std::initializer_list<const at::TensorBase*> tensors) {
  std::uint64_t most = 0;
  for (const at::TensorBase* t : tensors) {
    if (t != nullptr && t->defined()) {
      const auto n = static_cast<std::uint64_t>(t->numel());
      if (n > most) most = n;
    }
  }
  return most;
}

void HeldUses::visit(UseVisitor visitor) const {
  std::vector<TensorUse> uses;
  uses.reserve(tensors_.size());
  for (std::size_t i = 0; i < tensors_.size(); ++i) uses.emplace_back(tensors_[i], accesses_[i]);
  visitor(uses);
}

void add_launch_observer(LaunchObserver* observer) {
  const std::lock_guard<std::mutex> lock(observers_mutex());
  const detail::LaunchObservers* old = detail::launch_observers_relaxed();
  const std::size_t n = old == nullptr ? 0 : old->count;
  for (std::size_t i = 0; i < n; ++i) {
    if (old->observers[i] == observer) return;
  }
  detail::LaunchObservers* set = new_observers(n + 1);
  for (std::size_t i = 0; i < n; ++i) set->observers[i] = old->observers[i];
  set->observers[n] = observer;
  detail::g_launch_observers.store(set, std::memory_order_release);
}

void remove_launch_observer(LaunchObserver* observer) {
  const std::lock_guard<std::mutex> lock(observers_mutex());
  const detail::LaunchObservers* old = detail::launch_observers_relaxed();
  if (old == nullptr) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < old->count; ++i) kept += old->observers[i] != observer;
  if (kept == old->count) return;
  if (kept == 0) {
    detail::g_launch_observers.store(nullptr, std::memory_order_release);
    return;
  }
  detail::LaunchObservers* set = new_observers(kept);
  std::size_t j = 0;
  for (std::size_t i = 0; i < old->count; ++i) {
    if (old->observers[i] != observer) set->observers[j++] = old->observers[i];
  }
  detail::g_launch_observers.store(set, std::memory_order_release);
}

void observe_launch(const detail::LaunchObservers& observers, const Launch& launch,
                    const vdev::rt::TaskTag& tag, TaskThreads threads) {
  for (LaunchObserver* o : observers) o->launched(launch, tag, threads);
}

void observe_capture_dropped(std::uint64_t capture_id) {
  const detail::LaunchObservers* observers = launch_observers();
  if (observers == nullptr) return;
  for (LaunchObserver* o : *observers) o->capture_dropped(capture_id);
}

void observe_host_run(const HostRun& run) {
  // A whole call told here would never be told its end (HostRunScope tells both).
  TORCH_INTERNAL_ASSERT(!run.whole_call, "a whole call's host run is announced by HostRunScope");
  const detail::LaunchObservers* observers = launch_observers();
  if (C10_LIKELY(observers == nullptr)) return;
  for (LaunchObserver* o : *observers) o->host_run(run);
}

HostRunScope::HostRunScope(const HostRun& run) : run_(run), observers_(launch_observers()) {
  run_.whole_call = true;
  if (C10_LIKELY(observers_ == nullptr)) return;
  std::size_t told = 0;
  try {
    for (; told < observers_->count; ++told) observers_->observers[told]->host_run(run_);
  } catch (...) {  // a finding raised: those told already see the run end (no destructor runs)
    while (told-- > 0) observers_->observers[told]->host_run_ended(run_);
    throw;
  }
}

HostRunScope::~HostRunScope() {
  if (C10_LIKELY(observers_ == nullptr)) return;
  for (std::size_t i = observers_->count; i-- > 0;) observers_->observers[i]->host_run_ended(run_);
}

}  // namespace vdev::backend
