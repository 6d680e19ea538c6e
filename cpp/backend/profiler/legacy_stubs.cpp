// The profiler stubs of torch's marker-based device timing: what
// torch.autograd.profiler.profile(use_device="vdev") uses when it does not trace with Kineto
// (use_kineto=False, torch's state KINETO_PRIVATEUSE1_FALLBACK).
//
// In that mode torch records a device event on the current stream when each operator begins and
// ends (record), and after the profile reads the time between the two as the operator's device
// time (elapsed, KinetoEvent::privateuse1ElapsedUs); CUDA's stubs do the same with cudaEvents
// (torch/csrc/profiler/stubs/cuda.cpp). Without stubs registered, torch's defaults fail every
// call ("privateuse1 used in profiler but not enabled"), logged for every operator, and the
// elapsed times read back are garbage. Registered with registerPrivateUse1Methods
// (torch/csrc/profiler/stubs/base.h) by a static initialiser of this shared library.
//
// Thread rules: torch calls record on any thread that runs an operator while the profile records,
// elapsed on the thread that processes the results; each call stands alone (the stubs hold no
// state). Ownership: an event belongs to the shared_ptr torch keeps it in (ProfilerVoidEventStub),
// which deletes it; a mark still queued when it does is held by its task (runtime/event.h).
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <functional>
#include <memory>

#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "runtime/device.h"
#include "runtime/event.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct VdevProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  // A timing event on the current stream of the current device: it completes when the stream has
  // run everything queued before it, and takes the time then.
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const int index = vdev::rt::get_device();
    if (device != nullptr) *device = static_cast<c10::DeviceIndex>(index);
    vdev::rt::Stream& stream = current_runtime_stream(static_cast<c10::DeviceIndex>(index));
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    // An operator queued while the stream captures a graph does not run now: a record would be
    // captured into the graph (and replayed with it) and never complete here. No event: the
    // operator has no device time in this profile.
    if (stream.capture_id() != 0) return;
    auto e = std::make_shared<vdev::rt::Event>(/*timing=*/true);
    VDEV_RT(e->record(stream));
    *event = std::move(e);
  }

  // Microseconds between two recorded events, once both have completed (as CUDA's stub, which
  // synchronizes both). Events of different devices have no common timeline: 0, as for an event
  // that was not recorded (during a capture).
  float elapsed(const ProfilerVoidEventStub* start,
                const ProfilerVoidEventStub* end) const override {
    if (start == nullptr || end == nullptr || !*start || !*end) return 0.f;
    const auto* a = static_cast<const vdev::rt::Event*>(start->get());
    const auto* b = static_cast<const vdev::rt::Event*>(end->get());
    if (a->device() != b->device()) return 0.f;
    VDEV_RT(a->synchronize());
    VDEV_RT(b->synchronize());
    // A stream's marks complete in order, so the end never precedes the start.
    return static_cast<float>(VDEV_RT(a->elapsed_ms(*b)) * 1000.0);
  }

  // NVTX marks and ranges have no counterpart on vdev.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  void onEachDevice(std::function<void(int)> op) const override {
    const int previous = vdev::rt::get_device();
    const int n = vdev::rt::device_count();
    try {
      for (int d = 0; d < n; ++d) {
        VDEV_RT(vdev::rt::set_device(d));
        op(d);
      }
    } catch (...) {
      vdev::rt::unchecked_set_device(previous);
      throw;
    }
    vdev::rt::unchecked_set_device(previous);
  }

  // The current device, as CUDA's stub (cudaDeviceSynchronize).
  void synchronize() const override {
    VDEV_RT(vdev::rt::synchronize_device(vdev::rt::get_device()));
  }

  bool enabled() const override { return true; }
};

struct RegisterStubs {
  RegisterStubs() {
    static VdevProfilerStubs stubs;  // torch keeps the pointer for the process's life
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const RegisterStubs register_stubs;

}  // namespace
}  // namespace vdev::backend
