// The vdev random number generator: one default generator per device, and any number made by
// torch.Generator(device="vdev:N"), each a counter-based engine whose state is (seed, offset), as
// CUDA's Philox generator.
//
// A random operator reserves its counter range on the host when it is queued (reserve()), and the
// stream worker computes from that (seed, offset) alone (backend/random/keyed_engine.h): values
// depend only on seed, offset and shape, never on which stream runs the operator or when, and a
// random operator never needs the host to wait. Every operator reserves kOffsetPerDraw (one
// 128-bit Philox block, the key of its own engine); offsets stay multiples of 4 as CUDA's do.
//
// graphsafe_get_state() returns a generator that shares this one's state object and
// graphsafe_set_state() adopts another's, as CUDA's do (graph capture swaps states this way);
// clone_state() (GeneratorImpl::clone) copies the state.
//
// Thread rules: the (seed, offset) pair is guarded by the state's own mutex, so reserve() and the
// state accessors are safe from any thread and generators that share a state stay consistent.
// GeneratorImpl::mutex_ (taken by PyTorch's Python bindings) is not needed by this class.
// During a graph capture on the generator's device (its current stream), as CUDA's: setting the
// seed to another value, set_offset, get_offset, seed(), clone and new generators raise;
// setting the same seed does nothing; get_state / set_state (same seed) read and set the
// generator's offset within the graph being captured, not its own (backend/random/graph_draws.h).
// Ownership: default generators live for the process (leaked on purpose: ATen hands out
// references to them until exit).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <optional>

#include "backend/common/export.h"
#include "backend/common/torch_release.h"
#include "backend/random/philox_state.h"

namespace vdev::backend {

class VdevGeneratorImpl final : public torch_release::GeneratorBase<VdevGeneratorImpl> {
 public:
  VdevGeneratorImpl(c10::DeviceIndex device, c10::intrusive_ptr<PhiloxState> state);

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  void set_current_seed(uint64_t seed) override;  // also resets the offset to 0, as CUDA's
  void set_offset(uint64_t offset) override;      // a multiple of 4
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;  // a nondeterministic seed, set and returned
  // 16 bytes: the seed then the offset, native-endian (CUDA's layout); set_state also accepts 8
  // bytes (a seed only, offset 0), as CUDA's does.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;

  // Reserves the next counter range for one random operator.
  RandomDraw reserve();
  // torch.Generator.philox_state(increment) (torch 2.14 and later, common/torch_release.h), as
  // CUDA's outside a capture: reserves `increment` values rounded up to a multiple of 4 and
  // returns (seed, offset, 0) as 1-element int64 CPU tensors (uint64 bits). During a capture on
  // the generator's device it raises: CUDA's returns device tensors that every replay refills,
  // which vdev's graphs do not keep (backend/random/graph_draws.h).
  void reserve_philox_state(uint64_t increment, at::Tensor& seed, at::Tensor& offset,
                            at::Tensor& intragraph_offset);
  const c10::intrusive_ptr<PhiloxState>& state() const { return state_; }
  // For the default generators: keeps the current state alive for the rest of the process and
  // registers its lock with the fork handler (runtime/process.h), so that a forked child (a data
  // loader worker calling torch.manual_seed) never finds it held.
  void keep_state_for_fork();

 private:
  VdevGeneratorImpl* clone_impl() const override;
  c10::intrusive_ptr<PhiloxState> state_;
};

// The default generator of a device (IndexError for an index out of range).
VDEV_BACKEND_API const at::Generator& default_generator(c10::DeviceIndex device);
// A new generator of a device, seeded with the default seed.
at::Generator new_generator(c10::DeviceIndex device);
// torch.Generator(device="vdev:N"): a new generator, refused while N's current stream captures a
// graph (as CUDA's constructor is).
at::Generator new_user_generator(c10::DeviceIndex device);

// Reserves the draw of one random operator running on `device`: from `gen` when one is given,
// which must be a vdev generator (RuntimeError otherwise, naming its device type, as CUDA's check
// does), else from the device's default generator. While the current stream of the generator's
// device captures a graph, the draw is recorded for replays instead (graph_draws.h).
RandomDraw reserve_draw(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace vdev::backend
