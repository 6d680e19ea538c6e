// torch_vdev._testing: test-only entry points (runtime parsers and accounting, probes of the
// registered guard, hooks and host allocator, and the gates and logs that make asynchrony
// deterministic). A module of its own over the test-only libraries (cpp/runtime/testing,
// cpp/backend/testing), so production code neither loads nor exports any of it; only the test
// suite imports it. Streams are named by (device, stream_id), the fields of torch.Stream.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "backend/testing/launch_recorder.h"
#include "backend/testing/probes.h"
#include "bindings/errors.h"
#include "runtime/capability_profile.h"
#include "runtime/config.h"
#include "runtime/device_assert.h"
#include "runtime/fault_injection.h"
#include "runtime/machine_load.h"
#include "runtime/memory.h"
#include "runtime/process.h"
#include "runtime/stream_registry.h"
#include "runtime/testing/core_latency.h"
#include "runtime/testing/fork_locks.h"
#include "runtime/testing/gate.h"

namespace nb = nanobind;

namespace {

namespace rt = vdev::rt;
namespace probes = vdev::backend::testing;

void bind_runtime(nb::module_& t) {
  t.def("parse_device_count",
        [](const std::string& s) { return rt::parse_device_count(s, "VDEV_DEVICE_COUNT"); });
  t.def("parse_memory_size",
        [](const std::string& s) { return rt::parse_memory_size(s, "VDEV_DEVICE_MEMORY"); });
  t.def("parse_thread_count",
        [](const std::string& s) { return rt::parse_thread_count(s, "VDEV_DEVICE_THREADS"); });
  t.def("parse_oom_after",
        [](const std::string& s) { return rt::parse_oom_after(s, "VDEV_OOM_AFTER"); });
  t.def("parse_dist_fault", [](const std::string& s) {
    const rt::DistFault f = rt::parse_dist_fault(s, "VDEV_DIST_FAULT");
    return std::make_tuple(f.rank, f.nth, f.mode == rt::DistFaultMode::kAbort ? "abort" : "hang");
  });
  t.def("default_device_threads", &rt::default_device_threads);
  // A profile as a dict (runtime/capability_profile.h): what VDEV_PROFILE=value, or a JSON text,
  // describes.
  auto as_dict = [](const rt::CapabilityProfile& p) {
    nb::dict d;
    d["id"] = p.id;
    d["device_name"] = p.device_name;
    d["memory"] = p.memory;
    d["capability"] = nb::make_tuple(p.major, p.minor);
    d["multi_processor_count"] = p.multi_processor_count;
    d["bf16_emulated"] = p.bf16_emulated;
    d["unsupported_dtypes"] = p.unsupported_dtypes;
    d["missing_operators"] = p.missing_operators;
    return d;
  };
  t.def("load_profile", [as_dict](const std::string& v) { return as_dict(rt::load_profile(v)); });
  t.def("parse_profile_json", [as_dict](const std::string& text, const std::string& source) {
    return as_dict(rt::parse_profile_json(text, source));
  });
  t.def("profile_names", &rt::profile_names);
  t.def("profile_dtype_names", &rt::profile_dtype_names);
  t.def("runtime_allocated_bytes", [](int device) { return rt::memory_stats(device).allocated; });
  t.def(
      "fail_next_worker_start", [] { rt::inject_fault(rt::Fault::kWorkerStart); },
      "The next stream worker start fails as if its thread could not be created.");
  t.def(
      "set_device_asserts",
      [](bool enabled) {
        // The backend's classifier, kept the first time it is taken away.
        static const rt::DeviceAssertClassifier installed = rt::device_assert_classifier();
        rt::set_device_assert_classifier(enabled ? installed : nullptr);
      },
      nb::arg("enabled"),
      "Whether task failures may be device-side asserts (runtime/device_assert.h): tests of how "
      "any task error is delivered turn them off.");
  t.def(
      "new_stream", [](int device) { return rt::new_stream(device, 0).id(); },
      "The id of a brand-new stream of `device` (no worker yet; the pool's are shared).");
  t.def("fork_lock_count", &rt::testing::fork_lock_count);
  t.def("hold_fork_lock", &rt::testing::hold_fork_lock, nb::arg("index"), nb::arg("ms"));
  t.def("held_fork_locks", &rt::testing::held_fork_locks);
  t.def("pointer_device",
        [](std::uintptr_t addr) { return rt::pointer_device(reinterpret_cast<void*>(addr)); });
}

void bind_probes(nb::module_& t) {
  t.def("hooks_device_from_ptr", &probes::hooks_device_from_ptr);
  t.def("hooks_has_primary_context", &probes::hooks_has_primary_context);
  t.def("hooks_is_available", &probes::hooks_is_available);
  t.def("hooks_device_count", &probes::hooks_device_count);
  t.def("hooks_maybe_exchange_device", &probes::hooks_maybe_exchange_device);
  t.def("guard_call", &probes::guard_call);
  t.def("worker_intra_op_threads", &probes::worker_intra_op_threads, nb::arg("device"),
        nb::arg("elements") = 0, nb::arg("stream_id") = -1, nb::arg("host_waits") = false,
        nb::call_guard<nb::gil_scoped_release>(),
        "The intra-op threads a kernel task touching `elements` elements runs with on the stream "
        "(the current one when -1), started while the calling thread runs or, with host_waits, "
        "while it waits for the device; waits for it.");
  t.def("hook_checks_ns", &probes::hook_checks_ns, nb::arg("iterations"));
  t.def("start_recording_launches", &probes::start_recording_launches,
        "Records every launch and host run from now on (backend/common/launch.h).");
  t.def(
      "stop_recording_launches",
      [] {
        nb::list out;
        for (const probes::RecordedLaunch& r : probes::stop_recording_launches()) {
          nb::dict d;
          d["host_run"] = r.host_run;
          d["name"] = r.name;
          d["operation"] = r.operation;
          d["device"] = r.device;
          d["stream"] = r.stream;
          d["kind"] = r.kind;
          d["bytes"] = r.bytes;
          d["elements_hint"] = r.elements_hint;
          d["replays_capture"] = r.replays_capture;
          d["threads"] = nb::make_tuple(r.threads_host_running, r.threads_host_waiting);
          d["whole_call"] = r.whole_call;
          d["uses"] = nb::cast(r.uses);
          out.append(d);
        }
        return out;
      },
      "Stops recording; a dict per launch or host run: what it described (name, operation, "
      "stream, uses as (data_ptr, bytes, access 0 read / 1 write / 2 read-write)) and what it "
      "derived (kind, bytes, elements_hint, threads).");
  t.def("policy_threads", &probes::policy_threads, nb::arg("kind"), nb::arg("bytes"),
        nb::arg("elements"),
        "The thread policy's (host_running, host_waiting) limits for such a task queued now.");
  t.def("cache_line_round_trip_ns", &rt::testing::cache_line_round_trip_ns,
        nb::arg("iterations") = 200000, nb::arg("rounds") = 3,
        nb::call_guard<nb::gil_scoped_release>(),
        "How long a cache line takes to another core and back (ns, median of `rounds`): "
        "benchmarks record it, since the host-to-worker hand-off costs a few such trips.");
  t.def("busy_workers", &rt::busy_workers,
        "Stream workers running a task now, not counting those blocked in an event wait.");
  t.def("express_calls", &probes::express_calls,
        "How many calls the express lane (the unboxed host path of the hottest operators) queued "
        "on this thread.");
  t.def("express_misses", &probes::express_misses,
        "How many calls missed the express lane's per-thread table on this thread.");
  t.def("out_layout_trials", &probes::out_layout_trials,
        "How many layout trials launch plans ran (CPU's kernel on stand-ins that keep the "
        "arguments' layouts), in the process.");
  t.def("out_kernels_declined_for_layout", &probes::out_kernels_declined_for_layout,
        "How many launch plans were denied their out= kernel because their outputs' layouts "
        "differ from CPU's or could not be compared, in the process.");
  t.def("host_team_releases", &probes::host_team_releases,
        "How many times a host thread gave its idle OpenMP team back (the thread policy).");
  t.def("enqueue_cpu_busy", &probes::enqueue_cpu_busy, nb::arg("device"), nb::arg("stream_id"),
        nb::arg("seconds"), nb::arg("path"));
  t.def("enqueue_warning", &probes::enqueue_warning, nb::arg("device"), nb::arg("stream_id"),
        nb::arg("message"));
  t.def("host_record_event", &probes::host_record_event, nb::arg("ptr"), nb::arg("device"),
        nb::arg("stream_id"),
        "The host allocator's record_event on the pinned memory at `ptr` for (device, stream_id).");
}

void bind_gates(nb::module_& t) {
  nb::class_<rt::testing::Gate>(t, "Gate")
      .def(nb::new_([] { return std::make_shared<rt::testing::Gate>(); }))
      .def("open", &rt::testing::Gate::open)
      .def("is_open", &rt::testing::Gate::is_open)
      .def("waiting", &rt::testing::Gate::waiting, "Tasks currently blocked on this gate.");
  nb::class_<rt::testing::Log>(t, "Log")
      .def(nb::new_([] { return std::make_shared<rt::testing::Log>(); }))
      .def("values", &rt::testing::Log::values);
  t.def("enqueue_gate", [](int device, std::int64_t id, std::shared_ptr<rt::testing::Gate> g) {
    rt::testing::enqueue_gate(rt::stream_from_id(device, id), std::move(g));
  });
  t.def("enqueue_log",
        [](int device, std::int64_t id, std::shared_ptr<rt::testing::Log> log, std::int64_t v) {
          rt::testing::enqueue_log(rt::stream_from_id(device, id), std::move(log), v);
        });
  t.def("enqueue_failure", [](int device, std::int64_t id, const std::string& message) {
    rt::testing::enqueue_failure(rt::stream_from_id(device, id), message);
  });
  t.def("enqueue_noop",
        [](int device, std::int64_t id) { rt::stream_from_id(device, id).enqueue("noop", [] {}); });
  t.def("stream_query",
        [](int device, std::int64_t id) { return rt::stream_from_id(device, id).query(); });
  t.def(
      "stream_running_task",
      [](int device, std::int64_t id) {
        return std::string(rt::stream_from_id(device, id).running_task());
      },
      "The name of the task the stream's worker runs or ran last ('' before the first).");
}

}  // namespace

NB_MODULE(_testing, m) {
  m.doc() = "Test-only entry points of torch_vdev (not part of the public API)";
  vdev::bindings::register_c10_errors();
  bind_runtime(m);
  bind_probes(m);
  bind_gates(m);
}
