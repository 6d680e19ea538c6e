#include "backend/random/graph_draws.h"

#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <utility>

#include "runtime/process.h"

namespace vdev::backend {
namespace {

struct Registry {
  std::mutex mu;
  // Per capture: each state drawn from, with the offset within the graph reached so far.
  std::map<std::uint64_t, std::vector<GraphRngUse>> captures;
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
  auto it = r.captures.find(capture_id);
  if (it == r.captures.end()) return std::nullopt;
  for (GraphRngUse& use : it->second) {
    if (use.state == state) {
      const RandomDraw draw{0, use.increment, state.get()};
      use.increment += kOffsetPerDraw;
      return draw;
    }
  }
  it->second.push_back(GraphRngUse{state, kOffsetPerDraw});
  return RandomDraw{0, 0, state.get()};
}

std::vector<GraphRngUse> end_graph_draws(std::uint64_t capture_id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.captures.find(capture_id);
  if (it == r.captures.end()) return {};
  std::vector<GraphRngUse> uses = std::move(it->second);
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
