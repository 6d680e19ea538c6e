// vdev's Kineto activity profiler: what torch.profiler shows of the device.
//
// Registered with torch's PrivateUse1ProfilerRegistry (REGISTER_PRIVATEUSE1_PROFILER), which hands
// it to Kineto when a profile with ProfilerActivity.PrivateUse1 is prepared. Kineto then calls, on
// the profiler's thread: configure (a session, when device activities are asked for), start,
// stop, processTrace, getDeviceInfo / getResourceInfos / getTraceBuffer, and destroys the
// session. torch pushes the correlation id of every host operator on the thread that runs it
// (push/popCorrelationId), which the device timeline keeps per thread so that each queued task
// carries the id of the operator that queued it.
//
// Each task becomes two activities, linked as CUPTI links a launch and its kernel: a runtime
// event on the host thread for the enqueue call (PRIVATEUSE1_RUNTIME: vdevLaunchKernel,
// vdevMemcpyAsync, ...; a flow start) and the device activity on its device's track, one row per
// stream (CONCURRENT_KERNEL, GPU_MEMCPY with bytes and bandwidth, GPU_MEMSET; the flow's end),
// both linked to the launching operator, so torch attributes device time to it
// (device_time_total) and the chrome trace draws the arrow. Kernel activities are named
// "vdev_kernel<op>", not "op": key_averages groups by name and would count the kernel as the
// operator. Host calls that wait for the device (synchronize) are runtime events. Event records
// have only their runtime event; a stream's wait for an event is a device activity ("Stream wait
// event") spanning the wait. A graph replay is an annotation (GPU_USER_ANNOTATION) spanning the
// operations it runs, which are activities of their own linked to the replay's operator: each
// device activity's time is counted once in torch's device totals, and runtime events get none.
// Copies are named as Kineto names CUPTI's; getDeviceProperties() fills the trace's
// "deviceProperties" from the devices' properties.
//
// Timestamps: CLOCK_REALTIME nanoseconds, Kineto's clock. Activities are copied into Kineto's
// logger (handleGenericActivity), so nothing outlives the session.
//
// Thread rules: Kineto calls the session from one thread at a time, except push/popCorrelationId
// (any host thread). Ownership: Kineto owns the profiler and its sessions.
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/common/json_text.h"
#include "backend/profiler/device_timeline.h"
#include "runtime/device.h"

namespace vdev::backend {
namespace {

using libkineto::ActivityType;
using vdev::rt::TaskKind;

bool has_device_activity(TaskKind k) {
  return k != TaskKind::kEventRecord && k != TaskKind::kOther;
}

const char* launch_name(TaskKind k) {
  switch (k) {
    case TaskKind::kMemcpyHtoD:
    case TaskKind::kMemcpyDtoH:
    case TaskKind::kMemcpyDtoD:
    case TaskKind::kMemcpyPtoP:
      return "vdevMemcpyAsync";
    case TaskKind::kMemset:
      return "vdevMemsetAsync";
    case TaskKind::kCollective:
      return "vdevLaunchCollective";
    case TaskKind::kGraphReplay:
      return "vdevGraphLaunch";
    case TaskKind::kEventRecord:
      return "vdevEventRecord";
    case TaskKind::kEventWait:
      return "vdevStreamWaitEvent";
    case TaskKind::kKernel:
    case TaskKind::kOther:
      break;
  }
  return "vdevLaunchKernel";
}

ActivityType device_type(TaskKind k) {
  switch (k) {
    case TaskKind::kMemcpyHtoD:
    case TaskKind::kMemcpyDtoH:
    case TaskKind::kMemcpyDtoD:
    case TaskKind::kMemcpyPtoP:
      return ActivityType::GPU_MEMCPY;
    case TaskKind::kMemset:
      return ActivityType::GPU_MEMSET;
    case TaskKind::kGraphReplay:
      // A span over the operations it runs, each its own activity: an annotation, as CUDA shows
      // record_function ranges on a stream's track. torch counts annotations in no device total
      // (is_user_annotation), so the replay's time is not counted besides its operations'.
      return ActivityType::GPU_USER_ANNOTATION;
    default:
      return ActivityType::CONCURRENT_KERNEL;
  }
}

// Memcpy activities are named as Kineto names CUPTI's ("Memcpy <kind> (<source> -> <destination>)",
// memcpyName in libkineto/src/CuptiActivity.h, with CUPTI's memory kinds: Pageable, Pinned,
// Device), so that tools keyed on CUDA's names read vdev's.
std::string device_name(const vdev::rt::TaskRecord& r) {
  const bool pinned = r.tag.host == vdev::rt::HostMemory::kPinned;
  switch (r.tag.kind) {
    case TaskKind::kMemcpyHtoD:
      return pinned ? "Memcpy HtoD (Pinned -> Device)" : "Memcpy HtoD (Pageable -> Device)";
    case TaskKind::kMemcpyDtoH:
      return pinned ? "Memcpy DtoH (Device -> Pinned)" : "Memcpy DtoH (Device -> Pageable)";
    case TaskKind::kMemcpyDtoD:
      return "Memcpy DtoD (Device -> Device)";
    case TaskKind::kMemcpyPtoP:
      return "Memcpy PtoP (Device -> Device)";
    case TaskKind::kMemset:
      return "Memset (Device)";
    case TaskKind::kEventWait:
      return "Stream wait event";
    case TaskKind::kCollective:
      return std::string("vccl:") + r.name;
    case TaskKind::kGraphReplay:
      return "Graph replay";
    default:
      return std::string("vdev_kernel<") + r.name + ">";
  }
}

// An activity on track (`pid`, `tid`) from `start` to `end`, linked to the host operator `op`.
libkineto::GenericTraceActivity make_activity(ActivityType type, const std::string& name,
                                              int32_t pid, int32_t tid, int64_t start, int64_t end,
                                              const libkineto::ITraceActivity* op) {
  static const libkineto::TraceSpan kSpan(0, 0, "vdev");
  libkineto::GenericTraceActivity a(kSpan, type, name);
  a.device = pid;
  a.resource = tid;
  a.threadId = tid;
  a.startTime = start;
  a.endTime = end;
  a.linked = op;
  return a;
}

// The graph replays of a session by stream, to find the replay that ran a task (a task a replay
// runs is reported inside the replay's span, on the replay's stream).
class ReplayIndex {
 public:
  explicit ReplayIndex(const std::vector<vdev::rt::TaskRecord>& tasks) {
    for (const vdev::rt::TaskRecord& r : tasks) {
      if (r.tag.kind == TaskKind::kGraphReplay) by_stream_[{r.device, r.stream}].push_back(&r);
    }
    for (auto& [stream, replays] : by_stream_) {
      std::sort(replays.begin(), replays.end(),
                [](const auto* a, const auto* b) { return a->start_ns < b->start_ns; });
    }
  }

  // The replay whose span holds `inner`, or nullptr.
  const vdev::rt::TaskRecord* enclosing(const vdev::rt::TaskRecord& inner) const {
    const auto it = by_stream_.find({inner.device, inner.stream});
    if (it == by_stream_.end()) return nullptr;
    const auto& replays = it->second;
    // The last replay that started no later than `inner` (a stream runs one task at a time).
    auto after = std::upper_bound(
        replays.begin(), replays.end(), inner.start_ns,
        [](std::int64_t t, const vdev::rt::TaskRecord* r) { return t < r->start_ns; });
    if (after == replays.begin()) return nullptr;
    const vdev::rt::TaskRecord* replay = *(after - 1);
    return inner.end_ns <= replay->end_ns ? replay : nullptr;
  }

 private:
  std::map<std::pair<int, std::int64_t>, std::vector<const vdev::rt::TaskRecord*>> by_stream_;
};

class VdevSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    DeviceTimeline::instance().start();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    DeviceTimeline::instance().stop();
    records_ = DeviceTimeline::instance().take();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }
  void pushCorrelationId(uint64_t id) override { DeviceTimeline::instance().push_correlation(id); }
  void popCorrelationId() override { DeviceTimeline::instance().pop_correlation(); }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity, int64_t start_time,
                    int64_t end_time) override {
    auto linked = [&](std::uint64_t corr) -> const libkineto::ITraceActivity* {
      return corr == 0 ? nullptr : linked_activity(static_cast<int32_t>(corr));
    };
    const int32_t pid = static_cast<int32_t>(getpid());
    const ReplayIndex replays(records_.tasks);
    for (const vdev::rt::TaskRecord& r : records_.tasks) {
      if (r.tag.kind == TaskKind::kOther) continue;
      const bool on_device = has_device_activity(r.tag.kind);
      if (r.launch_id == 0) {
        // Run by a graph replay: no launch of its own; like a kernel of a CUDA graph (which
        // carries its cudaGraphLaunch's correlation), it belongs to the operator that launched
        // the replay.
        const vdev::rt::TaskRecord* replay = replays.enclosing(r);
        if (on_device)
          log_device_activity(logger, r, replay ? linked(replay->correlation) : nullptr);
        continue;
      }
      const libkineto::ITraceActivity* op = linked(r.correlation);
      // The launch, on the host thread that queued the task.
      libkineto::GenericTraceActivity launch =
          make_activity(ActivityType::PRIVATEUSE1_RUNTIME, launch_name(r.tag.kind), pid,
                        static_cast<int32_t>(r.host_thread), r.launch_ns, r.launch_end_ns, op);
      // torch reads an activity's id as its correlation id, in the operators' own numbering:
      // a host event linked to no operator (a launch from a thread the profile does not follow,
      // an event recorded outside any operator) whose id equals an operator's is credited with
      // that operator's device time (torch/autograd/profiler.py, _parse_kineto_results: events
      // with linked_correlation_id() 0 are matched by id against the device activities'
      // operators). vdev's launch ids count from 1 as torch's do, so such a launch has no id; the
      // "correlation" argument and the flow still link it to its device activity.
      launch.id = op != nullptr ? static_cast<int32_t>(r.launch_id) : 0;
      if (on_device) {
        launch.flow.id = r.launch_id;
        launch.flow.type = libkineto::kLinkAsyncCpuGpu;
        launch.flow.start = 1;
      }
      launch.addMetadata("correlation", r.launch_id);
      logger.handleGenericActivity(launch);
      // A replay's span is linked to no operator: torch would credit the operator with it
      // besides the operations inside it, which are linked to that operator themselves.
      if (on_device) {
        log_device_activity(logger, r, r.tag.kind == TaskKind::kGraphReplay ? nullptr : op);
      }
    }

    for (const vdev::rt::HostCallRecord& h : records_.host_calls) {
      libkineto::GenericTraceActivity call = make_activity(
          ActivityType::PRIVATEUSE1_RUNTIME, h.name, pid, static_cast<int32_t>(h.host_thread),
          h.start_ns, h.end_ns, linked(h.correlation));
      if (h.device >= 0) call.addMetadata("device", h.device);
      if (h.stream >= 0) call.addMetadata("stream", h.stream);
      logger.handleGenericActivity(call);
    }
    // getDeviceInfo() names the first device's process; the others are named here.
    bool first = true;
    for (const auto& [device, streams] : streams_) {
      if (!first) logger.handleDeviceInfo(device_info(device), start_time);
      first = false;
    }
    (void)end_time;
    records_ = {};
  }

  // The "deviceProperties" of the chrome trace (Kineto writes what each session returns, since
  // pytorch/kineto#1011), with the keys Kineto writes for CUDA's devices (DeviceProperties.cpp,
  // DevicePropertyMetadataFields): each device's id, name, memory, capability and processor count,
  // as the capability profile describes it (runtime/capability_profile.h). vdev has no warps,
  // registers or shared memory: those keys are absent rather than invented.
  std::string getDeviceProperties() override {
    std::string json;
    const int n = vdev::rt::device_count_noexcept();  // 0 for a malformed configuration
    for (int d = 0; d < n; ++d) {
      const vdev::rt::DeviceProperties& p = vdev::rt::device_properties(d);
      if (d > 0) json += ",";
      json += "{\"id\": " + std::to_string(d) + ", \"name\": " + json_string(p.name) +
              ", \"totalGlobalMem\": " + std::to_string(p.total_memory) +
              ", \"computeMajor\": " + std::to_string(p.major) +
              ", \"computeMinor\": " + std::to_string(p.minor) +
              ", \"numSms\": " + std::to_string(p.multi_processor_count) + "}";
    }
    return json;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int device = streams_.empty() ? 0 : streams_.begin()->first;
    return std::make_unique<libkineto::DeviceInfo>(device_info(device));
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> rows;
    for (const auto& [device, streams] : streams_) {
      for (std::int64_t s : streams) {
        rows.push_back(libkineto::ResourceInfo{s, s, device, "stream " + std::to_string(s)});
      }
    }
    return rows;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  // The task on its device's stream; `op` is the host operator that launched it.
  void log_device_activity(libkineto::ActivityLogger& logger, const vdev::rt::TaskRecord& r,
                           const libkineto::ITraceActivity* op) {
    libkineto::GenericTraceActivity task =
        make_activity(device_type(r.tag.kind), device_name(r), r.device,
                      static_cast<int32_t>(r.stream), r.start_ns, r.end_ns, op);
    task.id = static_cast<int32_t>(r.launch_id);
    task.flow.id = r.launch_id;
    task.flow.type = libkineto::kLinkAsyncCpuGpu;
    task.flow.start = 0;
    task.addMetadata("device", r.device);
    task.addMetadata("stream", r.stream);
    task.addMetadata("correlation", r.launch_id);
    if (r.tag.bytes > 0) {
      task.addMetadata("bytes", r.tag.bytes);
      const int64_t ns = r.end_ns - r.start_ns;
      if (device_type(r.tag.kind) != ActivityType::CONCURRENT_KERNEL) {
        // Bytes per nanosecond is GB/s, CUPTI's unit.
        if (ns > 0) {
          task.addMetadata("memory bandwidth (GB/s)", static_cast<double>(r.tag.bytes) / ns);
        } else {
          task.addMetadataQuoted("memory bandwidth (GB/s)", "N/A");
        }
      }
    }
    logger.handleGenericActivity(task);
    streams_[r.device].insert(r.stream);
  }

  static libkineto::DeviceInfo device_info(int device) {
    return libkineto::DeviceInfo{device, libkineto::kExceedMaxPid + device, "vdev",
                                 "vdev " + std::to_string(device)};
  }

  DeviceTimeline::Records records_;
  std::map<int, std::set<std::int64_t>> streams_;  // the tracks: streams used, per device
};

class VdevActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    // A CPU-only profile asks for host types only: no device timeline then.
    const bool device = types.count(ActivityType::CONCURRENT_KERNEL) ||
                        types.count(ActivityType::GPU_MEMCPY) ||
                        types.count(ActivityType::GPU_MEMSET);
    if (!device) return nullptr;
    return std::make_unique<VdevSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"vdev"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_MEMSET, ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(VdevActivityProfiler);

}  // namespace
}  // namespace vdev::backend
