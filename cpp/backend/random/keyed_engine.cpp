#include "backend/random/keyed_engine.h"

#include "backend/random/graph_draws.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <ATen/core/PhiloxRNGEngine.h>

namespace vdev::backend {

namespace {

// splitmix64 (Steele, Lea and Flood 2014): the usual expander of a 64-bit key into a larger
// generator state; consecutive outputs are distinct for any key.
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

at::Generator cpu_generator_for(const RandomDraw& recorded) {
  const RandomDraw draw = recorded.graph_state ? resolve_graph_draw(recorded) : recorded;
  // One generator and one engine per thread, refilled for each operator: constructing either
  // seeds a whole Mersenne Twister state (624 steps), which cost more than a small operator.
  thread_local const at::Generator gen = at::make_generator<at::CPUGeneratorImpl>();
  thread_local at::mt19937 engine;

  // The operator's key: Philox4x32-10 at counter block offset / 4 of the generator's seed, so
  // distinct (seed, offset) pairs get unrelated keys.
  at::Philox4_32 philox(draw.seed, /*subsequence=*/draw.offset / kOffsetPerDraw, /*offset=*/0);
  const uint64_t lo = philox();
  uint64_t key = lo | (static_cast<uint64_t>(philox()) << 32);
  at::mt19937_data_pod pod{};
  pod.seed_ = draw.seed;
  pod.seeded_ = true;
  // The filled words are drawn as they are (tempered) before the first twist: they are already
  // uniform and independent, so twisting first would only cost time.
  pod.left_ = static_cast<int>(pod.state_.size());
  pod.next_ = 0;
  for (std::size_t i = 0; i < pod.state_.size(); i += 2) {
    const uint64_t z = splitmix64(key);
    pod.state_[i] = static_cast<uint32_t>(z);
    pod.state_[i + 1] = static_cast<uint32_t>(z >> 32);
  }
  // No bit is forced (the reference init_by_array sets state[0]'s top bit so that the state is
  // never all zero): splitmix64's consecutive outputs are distinct, so the state cannot be all
  // zero, and state[0] is drawn as it is, so forcing a bit would bias every operator's first word.
  engine.set_data(pod);
  auto* impl = static_cast<at::CPUGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  impl->set_engine(engine);
  // Box-Muller keeps a second sample for the next call: it belongs to the previous operator.
  impl->set_next_float_normal_sample(std::nullopt);
  impl->set_next_double_normal_sample(std::nullopt);
  return gen;
}

}  // namespace vdev::backend
