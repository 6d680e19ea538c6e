// The state of a counter-based (Philox) generator and the counter range one random operator
// reserves from it: the values shared by the generators (generator.h), the draws of graphs
// (graph_draws.h) and the engines that compute from a draw (keyed_engine.h).
//
// Thread rules: a PhiloxState's (seed, offset) is guarded by its own mutex. Ownership: a
// PhiloxState is shared (intrusive_ptr) by the generators using it and the graphs drawing from it;
// a RandomDraw is a value.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <mutex>

namespace vdev::backend {

struct PhiloxState;

// The counter range one random operator reserved: its engine is keyed by (seed, offset). A draw
// recorded in a graph capture has `graph_state` set and `offset` relative to the replay's base
// (backend/random/graph_draws.h).
struct RandomDraw {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const PhiloxState* graph_state = nullptr;
};

constexpr uint64_t kOffsetPerDraw = 4;

// The shared (seed, offset) of one or more generators (graph-safe states share it).
struct PhiloxState final : c10::intrusive_ptr_target {
  explicit PhiloxState(uint64_t seed_in) : seed(seed_in) {}
  mutable std::mutex mu;
  uint64_t seed;
  uint64_t offset = 0;
};

}  // namespace vdev::backend
