#include "backend/random/graph_draws.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/process.h"

namespace vdev::backend {
namespace {

// One state a capture draws from: the offset within the graph the next draw takes, and the
// highest offset reached (what a replay advances the state by). They differ once get_state /
// set_state inside the capture (activation checkpointing) rewound the offset to draw again.
struct CapturedUse {
  c10::intrusive_ptr<PhiloxState> state;
  uint64_t next = 0;
  uint64_t high = 0;
};

struct Registry {
  std::mutex mu;
  std::map<std::uint64_t, std::vector<CapturedUse>> captures;

  // The capture's entry for `state` (made at offset 0), or null when no such capture.
  CapturedUse* use(std::uint64_t capture_id, const c10::intrusive_ptr<PhiloxState>& state) {
    auto it = captures.find(capture_id);
    if (it == captures.end()) return nullptr;
    for (CapturedUse& u : it->second) {
      if (u.state == state) return &u;
    }
    it->second.push_back(CapturedUse{state});
    return &it->second.back();
  }
};

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry;  // leaked: captures may end during interpreter teardown
    vdev::rt::register_fork_lock(&made->mu, vdev::rt::ForkLockLevel::kGenerators);
    return made;
  }();
  return *r;
}

thread_local const std::vector<ReplayDraw>* tls_replay = nullptr;

}  // namespace

void begin_graph_draws(std::uint64_t capture_id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.captures[capture_id];
}

std::optional<RandomDraw> reserve_graph_draw(std::uint64_t capture_id,
                                             const c10::intrusive_ptr<PhiloxState>& state) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  CapturedUse* u = r.use(capture_id, state);
  if (u == nullptr) return std::nullopt;
  const RandomDraw draw{0, u->next, state.get()};
  u->next += kOffsetPerDraw;
  u->high = std::max(u->high, u->next);
  return draw;
}

std::optional<uint64_t> graph_offset(std::uint64_t capture_id,
                                     const c10::intrusive_ptr<PhiloxState>& state) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  CapturedUse* u = r.use(capture_id, state);
  if (u == nullptr) return std::nullopt;
  return u->next;
}

bool set_graph_offset(std::uint64_t capture_id, const c10::intrusive_ptr<PhiloxState>& state,
                      uint64_t offset) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  CapturedUse* u = r.use(capture_id, state);
  if (u == nullptr) return false;
  u->next = offset;
  return true;
}

std::vector<GraphRngUse> end_graph_draws(std::uint64_t capture_id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.captures.find(capture_id);
  if (it == r.captures.end()) return {};
  std::vector<GraphRngUse> uses;
  for (CapturedUse& u : it->second) {
    if (u.high > 0) uses.push_back(GraphRngUse{std::move(u.state), u.high});
  }
  r.captures.erase(it);
  return uses;
}

void drop_graph_draws(std::uint64_t capture_id) noexcept {
  try {
    (void)end_graph_draws(capture_id);
  } catch (...) {  // out of memory while erasing: nothing to undo
  }
}

std::vector<ReplayDraw> reserve_replay_draws(const std::vector<GraphRngUse>& uses) {
  std::vector<ReplayDraw> draws;
  draws.reserve(uses.size());
  for (const GraphRngUse& use : uses) {
    std::lock_guard<std::mutex> lock(use.state->mu);
    draws.push_back(ReplayDraw{use.state.get(), use.state->seed, use.state->offset});
    use.state->offset += use.increment;
  }
  return draws;
}

ReplayDrawsScope::ReplayDrawsScope(const std::vector<ReplayDraw>* draws) : previous_(tls_replay) {
  tls_replay = draws;
}
ReplayDrawsScope::~ReplayDrawsScope() { tls_replay = previous_; }

RandomDraw resolve_graph_draw(const RandomDraw& draw) {
  if (tls_replay != nullptr) {
    for (const ReplayDraw& r : *tls_replay) {
      if (r.state == draw.graph_state) return RandomDraw{r.seed, r.base + draw.offset, nullptr};
    }
  }
  TORCH_CHECK(false,
              "vdev: a random operator recorded in a graph capture ran outside a replay of "
              "its graph (this is a bug in torch-vdev)");
}

}  // namespace vdev::backend
