// Test-only probes into the backend, built as their own library (libtorch_vdev_testing) so that
// the production libraries export none of them. Python reaches them through torch_vdev._testing,
// which only the test suite imports.
//
// Each probe goes through what PyTorch itself calls (the *registered* guard, hooks and host
// allocator), so the tests check the registrations as well as the behaviour. Errors surface as
// c10 errors.
//
// Thread rules: safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#define VDEV_TESTING_API __attribute__((visibility("default")))

namespace vdev::backend::testing {

// Calls `method` ("setDevice", "exchangeDevice", "getStream", "getDefaultStream",
// "getDeviceCapability", "exchangeStream", "queryStream") of the guard registered for PrivateUse1
// with the device parsed from `device` (e.g. "cpu", "vdev:1"). Returns the resulting device index
// (queryStream: 1 or 0).
VDEV_TESTING_API int guard_call(const std::string& method, const std::string& device);

// The registered PrivateUse1 hooks' answers.
VDEV_TESTING_API int hooks_device_from_ptr(std::uintptr_t ptr);
VDEV_TESTING_API bool hooks_has_primary_context(int device);
VDEV_TESTING_API bool hooks_is_available();
VDEV_TESTING_API int hooks_device_count();
VDEV_TESTING_API int hooks_maybe_exchange_device(int device);

// The intra-op thread count a kernel task that touches `elements` elements (its TaskTag's hint),
// queued now on stream `stream_id` of `device` (-1: the current one), sees on its worker (queues
// it through queue_launch and waits for it). `host_waits`: the task starts while this thread
// waits for the device (a task ahead of it holds the stream until then); otherwise while this
// thread runs (it polls for the task's result before it synchronizes).
VDEV_TESTING_API int worker_intra_op_threads(int device, std::uint64_t elements = 0,
                                             std::int64_t stream_id = -1, bool host_waits = false);

// The checks a small queued operator's host path makes for the bug finders and the profiler when
// none is on (profiler timeline, stream sanitizer and init tool, poison tool and memory history
// at an allocation and a free, happens-before clocks, injected allocation faults), `iterations`
// times: nanoseconds per operator's worth. Throws if any tool is on.
VDEV_TESTING_API double hook_checks_ns(std::int64_t iterations);

// How many calls the express lane queued on the calling thread (backend/executor/express.h).
VDEV_TESTING_API std::uint64_t express_calls();
// How many calls missed the express lane's per-thread table on the calling thread.
VDEV_TESTING_API std::uint64_t express_misses();

// How many layout trials launch plans ran, and how many plans were denied their out= kernel because
// their outputs' layouts differ from CPU's or could not be compared
// (backend/executor/out_kernel_layouts.h), in the process.
VDEV_TESTING_API std::uint64_t out_layout_trials();
VDEV_TESTING_API std::uint64_t out_kernels_declined_for_layout();

// How many times a host thread gave its OpenMP team back (backend/common/thread_policy.h).
VDEV_TESTING_API std::uint64_t host_team_releases();

// Queues on (device, stream_id) a task that multiplies CPU matrices (real ATen kernels, which
// do not look at process exit) for `seconds`, then writes "done" to the file `path`: the long
// kernel the exit rule must wait for (runtime/process.h).
VDEV_TESTING_API void enqueue_cpu_busy(int device, std::int64_t stream_id, double seconds,
                                       const std::string& path);

// Queues on (device, stream_id) a task that warns `message` (TORCH_WARN) on the stream worker: a
// kernel warning only the worker sees, as one that depends on values (worker_warnings.h).
VDEV_TESTING_API void enqueue_warning(int device, std::int64_t stream_id,
                                      const std::string& message);

// The registered host allocator's record_event for the pinned memory at `ptr` and the stream
// (device, stream_id), as PyTorch calls it for a tensor it cannot name the block of (ctx null).
VDEV_TESTING_API bool host_record_event(std::uintptr_t ptr, int device, std::int64_t stream_id);

}  // namespace vdev::backend::testing
