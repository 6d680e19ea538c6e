#include "backend/random/keyed_engine.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <ATen/core/PhiloxRNGEngine.h>

namespace vdev::backend {

at::Generator cpu_generator_for(const RandomDraw& draw) {
  // Philox subsequence = the operator's counter block: distinct operators never share a stream.
  at::Philox4_32 philox(draw.seed, /*subsequence=*/draw.offset / kOffsetPerDraw, /*offset=*/0);
  at::mt19937_data_pod pod{};
  pod.seed_ = draw.seed;
  pod.seeded_ = true;
  pod.left_ = 1;  // the first draw regenerates the state, as after mt19937's own seeding
  pod.next_ = 0;
  for (uint32_t& word : pod.state_) word = philox();
  pod.state_[0] |= 0x80000000u;  // never the all-zero state, as the reference init_by_array does
  at::mt19937 engine;
  engine.set_data(pod);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(draw.seed);
  static_cast<at::CPUGeneratorImpl*>(gen.unsafeGetGeneratorImpl())->set_engine(engine);
  return gen;
}

}  // namespace vdev::backend
