#include "runtime/happens_before.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "runtime/process.h"

namespace vdev::rt::hb {
namespace {

std::atomic<bool> g_tracking{false};

struct State {
  std::mutex mu;
  std::unordered_map<const Stream*, std::uint32_t> slots;  // guarded by mu
  std::vector<const Stream*> streams{nullptr};             // by slot; [0] is the host
  std::vector<Clock> clocks{Clock(1, 0)};                  // by slot; [0] is the host's

  std::uint32_t slot_locked(const Stream& s) {
    auto [it, fresh] = slots.try_emplace(&s, static_cast<std::uint32_t>(streams.size()));
    if (fresh) {
      streams.push_back(&s);
      clocks.emplace_back();
    }
    return it->second;
  }
  static void merge(Clock& into, const Clock& from) {
    if (into.size() < from.size()) into.resize(from.size(), 0);
    for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
  }
  void reset_locked() {
    slots.clear();
    streams.assign(1, nullptr);
    clocks.assign(1, Clock(1, 0));
  }
};

State& state() {
  // Leaked (hooks may run during static destruction); its lock is a fork lock, taken after the
  // sanitizer's (which holds it while calling here) and never while a stream's lock is held.
  static State* s = [] {
    auto* made = new State;
    register_fork_lock(&made->mu, ForkLockLevel::kStreams);
    return made;
  }();
  return *s;
}

Epoch advance_locked(State& st, std::uint32_t slot, Clock& clock) {
  Clock& own = st.clocks[slot];
  if (slot != kHostSlot) State::merge(own, st.clocks[kHostSlot]);
  if (own.size() <= slot) own.resize(slot + 1, 0);
  const Epoch e{slot, ++own[slot]};
  clock = own;
  return e;
}

}  // namespace

void set_tracking(bool on) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (on && !g_tracking.load()) st.reset_locked();
  g_tracking.store(on, std::memory_order_relaxed);
}

bool tracking() noexcept { return g_tracking.load(std::memory_order_relaxed); }

Epoch begin_stream_task(const Stream& s, Clock& clock) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return advance_locked(st, st.slot_locked(s), clock);
}

Epoch begin_host_access(Clock& clock) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return advance_locked(st, kHostSlot, clock);
}

bool known_to_host(const Epoch& e) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return ordered_before(e, st.clocks[kHostSlot]);
}

std::uint32_t slot_of(const Stream& s) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.slot_locked(s);
}

ClockPtr clock_of(const Stream& s) {
  if (!tracking()) return nullptr;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return std::make_shared<const Clock>(st.clocks[st.slot_locked(s)]);
}

void host_learns(const ClockPtr& c) noexcept {
  if (c == nullptr || !tracking()) return;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  try {
    State::merge(st.clocks[kHostSlot], *c);
  } catch (...) {  // out of memory growing a clock: the edge is lost (a missed report, never a
  }  // false one)
}

void stream_learns(const Stream& s, const ClockPtr& c) {
  if (c == nullptr || !tracking()) return;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  State::merge(st.clocks[st.slot_locked(s)], *c);
}

}  // namespace vdev::rt::hb
