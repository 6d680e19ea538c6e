#include "backend/random/keyed_engine.h"

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

at::Generator cpu_generator_for(const RandomDraw& draw) {
  // The operator's key: Philox4x32-10 at counter block offset / 4 of the generator's seed, so
  // distinct (seed, offset) pairs get unrelated keys.
  at::Philox4_32 philox(draw.seed, /*subsequence=*/draw.offset / kOffsetPerDraw, /*offset=*/0);
  const uint64_t lo = philox();
  uint64_t key = lo | (static_cast<uint64_t>(philox()) << 32);
  at::mt19937_data_pod pod{};
  pod.seed_ = draw.seed;
  pod.seeded_ = true;
  pod.left_ = 1;  // the first draw regenerates the state, as after mt19937's own seeding
  pod.next_ = 0;
  for (std::size_t i = 0; i < pod.state_.size(); i += 2) {
    const uint64_t z = splitmix64(key);
    pod.state_[i] = static_cast<uint32_t>(z);
    pod.state_[i + 1] = static_cast<uint32_t>(z >> 32);
  }
  pod.state_[0] |= 0x80000000u;  // never the all-zero state, as the reference init_by_array does
  at::mt19937 engine;
  engine.set_data(pod);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(draw.seed);
  static_cast<at::CPUGeneratorImpl*>(gen.unsafeGetGeneratorImpl())->set_engine(engine);
  return gen;
}

}  // namespace vdev::backend
