// The engine a random operator computes with on the stream worker: a CPU generator whose whole
// Mersenne Twister state is filled from Philox4x32-10 keyed by the operator's (seed, offset)
// (backend/random/generator.h). PyTorch's CPU kernels then draw every distribution exactly as they
// do on CPU, so vdev's distributions are CPU's by construction, while the values depend only on
// (seed, offset) and the operator's arguments.
//
// Why fill the state from Philox rather than seed the Twister: mt19937 seeds with 32 bits, so two
// operators' streams would collide after about 2^16 draws; 624 Philox words give every (seed,
// offset) pair its own full state.
//
// Thread rules: the returned generator is the calling thread's own and the next call on that thread
// refills it: use it for one operator, on the calling thread, and do not keep it.
#pragma once

#include <ATen/core/Generator.h>

#include "backend/random/generator.h"

namespace vdev::backend {

at::Generator cpu_generator_for(const RandomDraw& draw);

}  // namespace vdev::backend
