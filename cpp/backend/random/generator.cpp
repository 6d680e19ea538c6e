#include "backend/random/generator.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/ScalarType.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "backend/common/stream_lookup.h"
#include "backend/random/graph_draws.h"
#include "runtime/capture.h"
#include "runtime/device.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace vdev::backend {
namespace {

constexpr std::size_t kSeedBytes = sizeof(uint64_t);
constexpr std::size_t kStateBytes = kSeedBytes + sizeof(uint64_t);

void check_offset(uint64_t offset) {
  TORCH_CHECK_VALUE(offset % 4 == 0, "vdev generator offset must be a multiple of 4, got ", offset);
}

VdevGeneratorImpl& vdev_impl(const at::Generator& gen) {
  TORCH_CHECK(gen.device().type() == VdevGeneratorImpl::device_type(), "Expected a '",
              VdevGeneratorImpl::device_type(), "' device type for generator but found '",
              gen.device().type(), "'");
  return *static_cast<VdevGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
}

// The capture the current stream of `device` records into, or 0 (CUDA asks its current stream).
std::uint64_t capture_on(c10::DeviceIndex device) {
  if (C10_LIKELY(vdev::rt::active_captures() == 0)) return 0;
  return current_runtime_stream(device).capture_id();
}

// CUDA's assertNotCapturing, for the generator calls a capture cannot record.
void check_not_capturing(c10::DeviceIndex device, const char* attempt) {
  TORCH_CHECK(capture_on(device) == 0, attempt,
              " during vdev graph capture. If you need this call to be captured, please file an "
              "issue. Current stream capture status: active");
}

// CUDA's rule since torch 2.10: during a capture a seed may be "set" only to what it is.
void check_same_seed(uint64_t current, uint64_t seed) {
  TORCH_CHECK(current == seed,
              "VdevGeneratorImpl::set_current_seed can be called during stream capture only if "
              "new seed is the same as the original seed.");
}

}  // namespace

VdevGeneratorImpl::VdevGeneratorImpl(c10::DeviceIndex device, c10::intrusive_ptr<PhiloxState> state)
    : GeneratorBase(c10::Device(device_type(), device),
                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      state_(std::move(state)) {}

void VdevGeneratorImpl::set_current_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (C10_UNLIKELY(capture_on(device().index()) != 0)) {
    // torch.manual_seed inside a capture: the same seed changes nothing (the offset stays, as
    // CUDA's); another seed is refused, as a replay could not repeat it.
    check_same_seed(state_->seed, seed);
    return;
  }
  state_->seed = seed;
  state_->offset = 0;
}

void VdevGeneratorImpl::set_offset(uint64_t offset) {
  check_not_capturing(device().index(), "Cannot call VdevGeneratorImpl::set_offset");
  check_offset(offset);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->offset = offset;
}

uint64_t VdevGeneratorImpl::get_offset() const {
  check_not_capturing(device().index(), "Cannot call VdevGeneratorImpl::get_offset");
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->offset;
}

uint64_t VdevGeneratorImpl::current_seed() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->seed;
}

uint64_t VdevGeneratorImpl::seed() {
  check_not_capturing(device().index(), "Cannot call VdevGeneratorImpl::seed");
  const uint64_t s = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(s);
  return s;
}

void VdevGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  // Every check comes before any change: a rejected state leaves the generator as it was.
  const c10::ScalarType dtype = c10::typeMetaToScalarType(new_state.dtype());
  TORCH_CHECK_TYPE(
      new_state.layout() == c10::kStrided && new_state.device().is_cpu() && dtype == c10::kByte,
      "vdev RNG state must be a CPU torch.ByteTensor (torch.uint8), got a torch.",
      c10::getDtypeNames(dtype).first, " tensor on ", new_state.device());
  const std::size_t n = static_cast<std::size_t>(new_state.numel());
  TORCH_CHECK_VALUE(n == kStateBytes || n == kSeedBytes, "vdev RNG state is wrong size: expected ",
                    kStateBytes, " bytes (seed, offset) or ", kSeedBytes,
                    " bytes (seed only), got ", n);
  TORCH_CHECK_VALUE(new_state.is_contiguous(), "vdev RNG state must be contiguous");
  uint64_t seed = 0;
  uint64_t offset = 0;
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed, bytes, kSeedBytes);
  if (n == kStateBytes) std::memcpy(&offset, bytes + kSeedBytes, sizeof(offset));
  check_offset(offset);
  if (const std::uint64_t capture = capture_on(device().index()); C10_UNLIKELY(capture != 0)) {
    check_same_seed(current_seed(), seed);
    // The offset within the graph (graph_draws.h): the generator itself is left alone.
    if (set_graph_offset(capture, state_, offset)) return;
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->seed = seed;
  state_->offset = offset;
}

c10::intrusive_ptr<c10::TensorImpl> VdevGeneratorImpl::get_state() const {
  at::Tensor t = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions(at::kByte));
  uint64_t seed = 0;
  uint64_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    seed = state_->seed;
    offset = state_->offset;
  }
  if (const std::uint64_t capture = capture_on(device().index()); C10_UNLIKELY(capture != 0)) {
    if (std::optional<uint64_t> in_graph = graph_offset(capture, state_)) offset = *in_graph;
  }
  std::memcpy(t.data_ptr(), &seed, kSeedBytes);
  std::memcpy(static_cast<uint8_t*>(t.data_ptr()) + kSeedBytes, &offset, sizeof(offset));
  return t.getIntrusivePtr();
}

void VdevGeneratorImpl::graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) {
  TORCH_CHECK(state && state->device().type() == device_type(), "Expected a '", device_type(),
              "' generator state but found '",
              state ? c10::DeviceTypeName(state->device().type()) : std::string("None"), "'");
  state_ = static_cast<const VdevGeneratorImpl&>(*state).state_;
}

c10::intrusive_ptr<c10::GeneratorImpl> VdevGeneratorImpl::graphsafe_get_state() const {
  return c10::make_intrusive<VdevGeneratorImpl>(device().index(), state_);
}

RandomDraw VdevGeneratorImpl::reserve() {
  std::lock_guard<std::mutex> lock(state_->mu);
  const RandomDraw draw{state_->seed, state_->offset};
  state_->offset += kOffsetPerDraw;
  return draw;
}

void VdevGeneratorImpl::reserve_philox_state(uint64_t increment, at::Tensor& seed,
                                             at::Tensor& offset, at::Tensor& intragraph_offset) {
  TORCH_CHECK_NOT_IMPLEMENTED(capture_on(device().index()) == 0,
                              "Generator.philox_state during a vdev graph capture is not supported "
                              "by vdev (CUDA's returns device tensors that each replay refills)");
  // A multiple of 4 (one Philox counter step per 4 values), wrapping modulo 2**64 as CUDA's.
  const uint64_t advance = increment + (4 - increment % 4) % 4;
  uint64_t reserved_seed = 0;
  uint64_t reserved_offset = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    reserved_seed = state_->seed;
    reserved_offset = state_->offset;
    state_->offset += advance;
  }
  const auto int64_cpu = at::TensorOptions().dtype(at::kLong);
  seed = at::empty({1}, int64_cpu).fill_(static_cast<int64_t>(reserved_seed));
  offset = at::empty({1}, int64_cpu).fill_(static_cast<int64_t>(reserved_offset));
  intragraph_offset = at::zeros({1}, int64_cpu);
}

VdevGeneratorImpl* VdevGeneratorImpl::clone_impl() const {
  check_not_capturing(device().index(), "Cannot call VdevGeneratorImpl::clone_impl");
  auto copy = c10::make_intrusive<PhiloxState>(0);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    copy->seed = state_->seed;
    copy->offset = state_->offset;
  }
  return new VdevGeneratorImpl(device().index(), std::move(copy));
}

void VdevGeneratorImpl::keep_state_for_fork() {
  c10::raw::intrusive_ptr::incref(state_.get());  // never released: the lock must outlive forks
  vdev::rt::register_fork_lock(&state_->mu, vdev::rt::ForkLockLevel::kGenerators);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  const c10::DeviceIndex index =
      checked_device_index(c10::Device(VdevGeneratorImpl::device_type(), device), "generator");
  // Made once for every device (the device count is fixed for the process; a valid index above
  // means it is known) and leaked: ATen hands out references to them until the process exits.
  static const std::vector<at::Generator>* const generators = [] {
    auto* all = new std::vector<at::Generator>;
    const int count = vdev::rt::device_count();
    for (int i = 0; i < count; ++i) {
      all->push_back(new_generator(static_cast<c10::DeviceIndex>(i)));
      vdev_impl(all->back()).keep_state_for_fork();
    }
    return all;
  }();
  return (*generators)[static_cast<std::size_t>(index)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  const c10::DeviceIndex index =
      checked_device_index(c10::Device(VdevGeneratorImpl::device_type(), device), "Generator");
  return at::make_generator<VdevGeneratorImpl>(
      index, c10::make_intrusive<PhiloxState>(c10::default_rng_seed_val));
}

at::Generator new_user_generator(c10::DeviceIndex device) {
  const c10::DeviceIndex index =
      checked_device_index(c10::Device(VdevGeneratorImpl::device_type(), device), "Generator");
  check_not_capturing(index, "Cannot construct a new VdevGeneratorImpl");
  return new_generator(index);
}

RandomDraw reserve_draw(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  VdevGeneratorImpl& impl =
      gen.has_value() && gen->defined() ? vdev_impl(*gen) : vdev_impl(default_generator(device));
  if (const std::uint64_t capture = capture_on(impl.device().index()); C10_UNLIKELY(capture != 0)) {
    if (auto draw = reserve_graph_draw(capture, impl.state())) return *draw;
  }
  return impl.reserve();
}

}  // namespace vdev::backend
