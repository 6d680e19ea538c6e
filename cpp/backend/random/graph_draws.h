// Random numbers in accelerator graphs: every replay draws fresh numbers, as CUDA's graph-safe
// Philox generators do (CUDAGeneratorState's capture prologue and replay prologue).
//
// While a stream captures (runtime/capture.h), a random operator queued on it does not take its
// (seed, offset) from the generator: reserve_draw() (generator.h) asks reserve_graph_draw(), which
// gives it an offset *within the graph* for that generator's state, and leaves the generator
// untouched. At capture end, each state used gets its whole-graph increment (end_graph_draws).
// Each replay reserves that increment from the state on the host, in program order
// (reserve_replay_draws), and the replay task installs the result on its worker
// (ReplayDrawsScope) while the recorded tasks run: a recorded draw then resolves to (the state's
// seed, the replay's base offset + its offset within the graph). Two replays thus draw different
// numbers, and a replay draws what the same operators queued eagerly at that generator offset
// would draw (the offsets advance by the same amounts).
//
// Thread rules: the capture registry has its own mutex (any thread); ReplayDrawsScope is per
// thread (the worker running a replay). Ownership: the registry keeps each capture's record until
// end_graph_draws or drop_graph_draws; GraphRngUse holds its generator state.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/random/philox_state.h"

namespace vdev::backend {

// A generator state a graph draws from, and how far one replay advances it.
struct GraphRngUse {
  c10::intrusive_ptr<PhiloxState> state;
  uint64_t increment;
};

// One replay's (seed, base offset) for a state.
struct ReplayDraw {
  const PhiloxState* state;
  uint64_t seed;
  uint64_t base;
};

void begin_graph_draws(std::uint64_t capture_id);
// The draw of a random operator recorded by capture `capture_id` (nullopt: no such capture
// registered; the caller draws as usual).
std::optional<RandomDraw> reserve_graph_draw(std::uint64_t capture_id,
                                             const c10::intrusive_ptr<PhiloxState>& state);
// The state's offset within the graph of capture `capture_id` (what its next recorded draw
// takes), and setting it: a generator's get_state / set_state during a capture read and write
// this, not the generator's own offset (as CUDA's intragraph offset), so activation checkpointing
// inside a capture recomputes with the numbers of the forward. nullopt / false: no such capture.
std::optional<uint64_t> graph_offset(std::uint64_t capture_id,
                                     const c10::intrusive_ptr<PhiloxState>& state);
bool set_graph_offset(std::uint64_t capture_id, const c10::intrusive_ptr<PhiloxState>& state,
                      uint64_t offset);
std::vector<GraphRngUse> end_graph_draws(std::uint64_t capture_id);
void drop_graph_draws(std::uint64_t capture_id) noexcept;

// On the host, when a replay is queued.
std::vector<ReplayDraw> reserve_replay_draws(const std::vector<GraphRngUse>& uses);

// On the worker, around a replay's recorded tasks.
class ReplayDrawsScope {
 public:
  explicit ReplayDrawsScope(const std::vector<ReplayDraw>* draws);
  ~ReplayDrawsScope();
  ReplayDrawsScope(const ReplayDrawsScope&) = delete;
  ReplayDrawsScope& operator=(const ReplayDrawsScope&) = delete;

 private:
  const std::vector<ReplayDraw>* previous_;
};

// The (seed, offset) a recorded draw stands for in the replay running on this thread.
RandomDraw resolve_graph_draw(const RandomDraw& draw);

}  // namespace vdev::backend
