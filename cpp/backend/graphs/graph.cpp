#include "backend/graphs/graph.h"

#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/memory/allocator.h"
#include "backend/memory/device_cache.h"
#include "backend/random/graph_draws.h"
#include "runtime/capture.h"
#include "runtime/device.h"
#include "runtime/device_assert.h"
#include "runtime/errors.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {
namespace {

std::atomic<c10::CaptureId_t> next_pool_uid{1};

vdev::rt::CaptureMode capture_mode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::ThreadLocal:
      return vdev::rt::CaptureMode::kThreadLocal;
    case at::GraphCaptureMode::Relaxed:
      return vdev::rt::CaptureMode::kRelaxed;
    case at::GraphCaptureMode::Default:  // CUDA's default is global
    case at::GraphCaptureMode::Global:
      break;
  }
  return vdev::rt::CaptureMode::kGlobal;
}

// What a replay runs: the recorded tasks, frozen, and the generator states they draw from.
struct ExecutableGraph {
  std::vector<vdev::rt::CapturedTask> tasks;
  std::vector<GraphRngUse> rng;

  // Replays of one graph run one at a time, as cudaGraphLaunch orders launches of one executable
  // graph: the recorded callables are not meant to run concurrently with themselves.
  mutable std::mutex running;

  // On the worker of the replaying stream. A failing task ends the replay (as a faulting kernel
  // ends a GPU's), and its error names it.
  // Runs the recorded tasks on the worker of vdev:`device` stream `stream`. While the profiler
  // records, each shows as an activity of that stream inside the replay's.
  void run(const std::vector<ReplayDraw>& draws, int device, std::int64_t stream) const {
    const std::lock_guard<std::mutex> lock(running);
    const ReplayDrawsScope scope(&draws);
    const bool traced = vdev::rt::task_tracing();
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      try {
        const std::int64_t start = traced ? vdev::rt::trace_clock_ns() : 0;
        tasks[i].fn();
        if (traced) {
          vdev::rt::report_host_run(tasks[i].name, device, stream, tasks[i].tag, start,
                                    /*launched=*/false);
        }
      } catch (const std::exception& e) {
        // A device-side assert of the replayed task is the replay's (runtime/device_assert.h).
        const vdev::rt::ErrorKind kind = vdev::rt::current_error_kind();
        vdev::rt::throw_error(
            vdev::rt::is_sticky_device_assert(tasks[i].name, kind, e.what())
                ? vdev::rt::ErrorKind::kDeviceAssert
                : kind,
            vdev::rt::detail::cat("graph replay: operation ", i + 1, " of ", tasks.size(), " [",
                                  tasks[i].name, "] failed: ", e.what()));
      }
    }
  }
};

class VdevGraph final : public at::GraphImplInterface {
 public:
  explicit VdevGraph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}
  ~VdevGraph() override { reset(); }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    TORCH_CHECK(!capturing_, "Graph.capture_begin(): this graph is already capturing");
    TORCH_CHECK(!capture_ended_,
                "Graph.capture_begin(): this graph already holds a captured graph; call reset() "
                "before capturing again");
    TORCH_CHECK_VALUE(pool.first == 0 || pool.second == 0,
                      "Graph.capture_begin(): pool must be a pool id from another graph's pool() "
                      "or from torch.vdev.graph_pool_handle(), got (",
                      pool.first, ", ", pool.second, ")");
    device_ = vdev::rt::get_device();
    vdev::rt::Stream& stream = current_runtime_stream(static_cast<c10::DeviceIndex>(device_));
    // CUDA's rule and message (CUDAGraph::capture_begin): the default stream never captures.
    TORCH_CHECK(&stream != &vdev::rt::default_stream(device_),
                "vdev graphs must be captured on a non-default stream. (However, after capture, "
                "it's ok to replay them on the default stream.)");
    capture_ = VDEV_RT(vdev::rt::begin_capture(stream, capture_mode(mode)));
    capture_id_ = vdev::rt::capture_id(*capture_);
    stream_ = &stream;
    capturing_ = true;
    pool_ = pool.first != 0 || pool.second != 0 ? pool
                                                : c10::MempoolId_t{next_pool_uid.fetch_add(1), 0};
    try {
      begin_graph_draws(capture_id_);
      device_cache(device_).begin_allocate_to_pool(pool_, capture_id_);
    } catch (...) {  // out of memory: leave capture mode, as if it never began
      reset();
      throw;
    }
    pool_held_ = true;
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "Graph.capture_end() called without a capture in progress");
    vdev::rt::Stream& stream = current_runtime_stream(static_cast<c10::DeviceIndex>(device_));
    TORCH_CHECK(&stream == stream_,
                "Graph.capture_end(): a capture must end on the stream it "
                "began on (vdev:",
                device_, " stream ", stream_->id(), "), not on stream ", stream.id());
    device_cache(device_).end_allocate_to_pool(capture_id_);
    capturing_ = false;
    std::vector<vdev::rt::CapturedTask> tasks;
    try {
      tasks = VDEV_RT(vdev::rt::end_capture(*capture_, stream));
    } catch (...) {
      drop_graph_draws(capture_id_);
      release_pool();
      capture_.reset();
      throw;
    }
    capture_.reset();
    rng_ = end_graph_draws(capture_id_);
    tasks_ = std::move(tasks);
    capture_ended_ = true;
    has_graph_ = true;
    if (!keep_graph_) instantiate();
  }

  void instantiate() override {
    TORCH_CHECK(capture_ended_, "Graph.instantiate(): capture_end() must be called first");
    if (executable_ != nullptr) {
      TORCH_CHECK(keep_graph_,
                  "Graph.instantiate() is intended to be called by the user only when "
                  "keep_graph=True");
    }
    TORCH_CHECK(has_graph_,
                "Graph.instantiate(): the captured graph was not kept "
                "(keep_graph=False) and is already instantiated");
    auto made = std::make_shared<ExecutableGraph>();
    made->tasks = tasks_;  // copies of the recorded callables: the kept graph stays intact
    made->rng = rng_;
    executable_ = std::move(made);
    if (!keep_graph_ && !debug_) {
      tasks_.clear();
      has_graph_ = false;
    }
  }

  void replay() override {
    TORCH_CHECK(capture_ended_, "Graph.replay() called without a preceding successful capture");
    if (executable_ == nullptr) instantiate();
    vdev::rt::Stream& stream = current_runtime_stream(static_cast<c10::DeviceIndex>(device_));
    // A replay queued during another capture is recorded into it; its draws would be fixed at
    // that capture, so every replay of the outer graph would repeat them.
    TORCH_CHECK(stream.capture_id() == 0 || executable_->rng.empty(),
                "Graph.replay(): replaying a graph that draws random numbers while vdev:", device_,
                " stream ", stream.id(),
                " captures another graph is not supported on vdev (its draws could not change "
                "per replay of the outer graph)");
    std::vector<ReplayDraw> draws = reserve_replay_draws(executable_->rng);
    // Observers replay what the capture recorded (the sanitizer: every access it captured).
    queue_launch({.stream = stream,
                  .name = "graph_replay",
                  .kind = vdev::rt::TaskKind::kGraphReplay,
                  .replays_capture = capture_id_},
                 [graph = executable_, draws = std::move(draws), device = stream.device(),
                  id = stream.id()] { graph->run(draws, device, id); });
  }

  void reset() noexcept override {
    if (capturing_) {  // abandoned mid-capture: leave capture mode, keep nothing
      capturing_ = false;
      try {
        device_cache(device_).end_allocate_to_pool(capture_id_);
        (void)vdev::rt::end_capture(*capture_, *stream_);
      } catch (...) {  // invalidated or unjoined: the streams left capture mode anyway
      }
      drop_graph_draws(capture_id_);
      capture_.reset();
    }
    release_pool();
    executable_.reset();
    observe_capture_dropped(capture_id_);
    tasks_.clear();
    rng_.clear();
    capture_ended_ = false;
    has_graph_ = false;
  }

  c10::MempoolId_t pool() const override {
    TORCH_CHECK(capture_ended_, "Graph.pool() called without a preceding successful capture");
    return pool_;
  }

  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    if (!debug_ && !keep_graph_) {
      TORCH_WARN("vdev graph debugging is not enabled: call enable_debug_mode() before capture");
      return;
    }
    TORCH_CHECK(has_graph_, "Graph.debug_dump(): no captured graph to dump (capture first)");
    std::ofstream out(path);
    TORCH_CHECK(out.good(), "Graph.debug_dump(): cannot write ", path);
    // Graphviz: the recorded operations in replay order, labelled with the stream that queued them.
    out << "digraph vdev_graph {\n  label=\"vdev:" << device_ << " graph, pool (" << pool_.first
        << ", " << pool_.second << ")\";\n";
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      out << "  n" << i << " [label=\"" << tasks_[i].name << "\\nstream " << tasks_[i].stream_id
          << "\"];\n";
      if (i > 0) out << "  n" << i - 1 << " -> n" << i << ";\n";
    }
    out << "}\n";
  }

 private:
  void release_pool() noexcept {
    if (!pool_held_) return;
    pool_held_ = false;
    try {
      device_cache(device_).release_pool(pool_);
    } catch (...) {  // out of memory while releasing: the pool stays cached, nothing is lost
    }
  }

  const bool keep_graph_;
  bool debug_ = false;
  int device_ = 0;
  vdev::rt::Stream* stream_ = nullptr;  // the capture stream
  std::shared_ptr<vdev::rt::Capture> capture_;
  std::uint64_t capture_id_ = 0;
  bool capturing_ = false;
  bool capture_ended_ = false;  // a successful capture_end: replay, pool, instantiate allowed
  bool has_graph_ = false;      // the recorded tasks are kept (keep_graph or debug)
  c10::MempoolId_t pool_{0, 0};
  bool pool_held_ = false;  // this graph counts in its pool's use count
  std::vector<vdev::rt::CapturedTask> tasks_;
  std::vector<GraphRngUse> rng_;
  std::shared_ptr<const ExecutableGraph> executable_;
};

}  // namespace

c10::MempoolId_t graph_pool_handle() { return {0, next_pool_uid.fetch_add(1)}; }

}  // namespace vdev::backend

namespace at {
// The key is the backend's name upper-cased: PrivateUse1 renamed to "vdev".
REGISTER_GRAPH_IMPL(VDEV, vdev::backend::VdevGraph);
}  // namespace at
