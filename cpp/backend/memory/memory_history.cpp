#include "backend/memory/memory_history.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "backend/memory/allocator.h"
#include "backend/memory/device_cache.h"
#include "runtime/device.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

using c10::CachingDeviceAllocator::AnnotationEntry;

// CUDA's gatherers (torch/csrc/cuda/memory_snapshot.cpp): Python and TorchScript frames, and C++
// frames for stacks="all".
std::shared_ptr<c10::GatheredContext> gather_python() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::shared_ptr<c10::GatheredContext> gather_with_cpp() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

// What is recorded outside the device caches: record_function annotations (device-independent,
// like CUDA's annotation buffer) and the callbacks that feed them and the compile contexts.
struct History {
  std::mutex mu;
  std::atomic<bool> enabled{false};
  std::vector<AnnotationEntry> annotations;  // the newest `max_entries`, oldest first once rotated
  std::size_t next = 0;
  std::size_t max_entries = 1;
  at::CallbackHandle annotation_callback = 0;
  at::CallbackHandle compile_callback = 0;
};

History& history() {
  // Leaked (record_function callbacks may run during teardown); a leaf lock for fork: nothing is
  // locked while it is held.
  static auto* h =
      vdev::rt::new_leaked_with_fork_lock<History>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *h;
}

void record_annotation(const char* name, const char* stage) {
  History& h = history();
  if (!h.enabled.load(std::memory_order_relaxed)) return;
  AnnotationEntry entry(static_cast<c10::DeviceIndex>(vdev::rt::get_device()), 0);
  entry.time_.t_ = trace_time_us();
  entry.recordUserMetadata("name", name);
  entry.recordUserMetadata("stage", stage);
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.annotations.size() < h.max_entries) {
    h.annotations.push_back(std::move(entry));
  } else {
    h.annotations[h.next] = std::move(entry);
    h.next = (h.next + 1) % h.max_entries;
  }
}

// The regions torch.compile runs (Dynamo names them so); CUDA records the innermost one with each
// trace entry of the device.
constexpr const char* kCompiledRegion = "Torch-Compiled Region";

bool is_compiled_region(const at::RecordFunction& fn) {
  return std::strncmp(fn.name(), kCompiledRegion, std::strlen(kCompiledRegion)) == 0;
}

at::CallbackHandle add_annotation_callback(bool global) {
  auto callback = at::RecordFunctionCallback(
                      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
                        record_annotation(fn.name(), "START");
                        return nullptr;
                      },
                      [](const at::RecordFunction& fn, at::ObserverContext*) {
                        record_annotation(fn.name(), "END");
                      })
                      .scopes({at::RecordScope::USER_SCOPE});
  return global ? at::addGlobalCallback(std::move(callback))
                : at::addThreadLocalCallback(std::move(callback));
}

at::CallbackHandle add_compile_context_callback() {
  return at::addGlobalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            if (is_compiled_region(fn)) {
              device_cache(vdev::rt::get_device()).push_compile_context(fn.name());
            }
            return nullptr;
          },
          [](const at::RecordFunction& fn, at::ObserverContext*) {
            if (is_compiled_region(fn)) device_cache(vdev::rt::get_device()).pop_compile_context();
          })
          .scopes({at::RecordScope::FUNCTION}));
}

// Installs or removes the callbacks (CUDA's setRecordFunctionCallbacks). Caller holds h.mu.
void set_callbacks(History& h, const MemoryHistoryOptions& o) {
  if (o.enabled) {
    if (h.annotation_callback == 0) {
      h.annotation_callback = add_annotation_callback(o.global_record_annotations);
    }
    if (o.compile_context && h.compile_callback == 0) {
      h.compile_callback = add_compile_context_callback();
    }
    return;
  }
  for (at::CallbackHandle* handle : {&h.annotation_callback, &h.compile_callback}) {
    if (*handle != 0) at::removeCallback(*handle);
    *handle = 0;
  }
}

std::uint32_t skip_mask(const std::vector<std::string>& actions) {
  std::uint32_t mask = 0;
  for (const std::string& a : actions) {
    mask |= 1U << c10::CachingDeviceAllocator::parseTraceEntryAction(a);
  }
  return mask;
}

}  // namespace

const char* trace_action_name(TraceEntry::Action a) {
  using A = TraceEntry::Action;
  switch (a) {
    case A::ALLOC:
      return "alloc";
    case A::FREE_REQUESTED:
      return "free_requested";
    case A::FREE_COMPLETED:
      return "free_completed";
    case A::SEGMENT_ALLOC:
      return "segment_alloc";
    case A::SEGMENT_FREE:
      return "segment_free";
    case A::SEGMENT_MAP:
      return "segment_map";
    case A::SEGMENT_UNMAP:
      return "segment_unmap";
    case A::SNAPSHOT:
      return "snapshot";
    case A::OOM:
      return "oom";
  }
  return "unknown";
}

void record_memory_history(const MemoryHistoryOptions& o) {
  HistorySettings settings;
  settings.enabled = o.enabled;
  settings.when = o.enabled ? o.when : RecordContext::NEVER;
  settings.gather = o.cpp_stacks ? &gather_with_cpp : &gather_python;
  settings.max_entries = o.max_entries;
  settings.clear = o.clear_history;
  settings.skip = skip_mask(o.skip_actions);
  if (o.enabled && o.cpp_stacks && settings.when != RecordContext::NEVER) {
    torch::unwind::unwind();  // warms C++ unwinding up, as CUDA does, before the first allocation
  }
  History& h = history();
  {
    std::lock_guard<std::mutex> lock(h.mu);
    if (o.clear_history || !o.enabled) {
      h.annotations.clear();
      h.next = 0;
    } else if (h.next != 0 || h.annotations.size() > o.max_entries) {
      std::rotate(h.annotations.begin(),
                  h.annotations.begin() + static_cast<std::ptrdiff_t>(h.next), h.annotations.end());
      h.next = 0;
      if (h.annotations.size() > o.max_entries) {
        h.annotations.erase(h.annotations.begin(),
                            h.annotations.end() - static_cast<std::ptrdiff_t>(o.max_entries));
      }
    }
    h.max_entries = std::max<std::size_t>(1, o.max_entries);
    set_callbacks(h, o);
    h.enabled.store(o.enabled, std::memory_order_relaxed);
  }
  for (int d = 0; d < vdev::rt::device_count(); ++d) device_cache(d).record_history(settings);
}

bool memory_history_enabled() { return history().enabled.load(std::memory_order_relaxed); }

MemorySnapshot memory_snapshot(bool include_traces) {
  MemorySnapshot out;
  const int n = vdev::rt::device_count();
  out.device_traces.resize(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) {
    CacheSnapshot snap = device_cache(d).snapshot(include_traces);
    std::move(snap.segments.begin(), snap.segments.end(), std::back_inserter(out.segments));
    out.device_traces[static_cast<std::size_t>(d)] = std::move(snap.trace);
  }
  if (include_traces) {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mu);
    out.annotations.reserve(h.annotations.size());
    const auto next = h.annotations.begin() + static_cast<std::ptrdiff_t>(h.next);
    out.annotations.insert(out.annotations.end(), next, h.annotations.end());
    out.annotations.insert(out.annotations.end(), h.annotations.begin(), next);
  }
  return out;
}

SymbolizedStacks symbolize_stacks(const std::vector<const c10::GatheredContext*>& contexts) {
  // The same stack is often shared (a block and its trace entries): symbolize each once.
  std::unordered_map<const c10::GatheredContext*, std::size_t> index;
  std::vector<torch::CapturedTraceback*> unique;
  for (const c10::GatheredContext* c : contexts) {
    if (index.emplace(c, unique.size()).second) {
      auto* tb = dynamic_cast<torch::CapturedTraceback*>(const_cast<c10::GatheredContext*>(c));
      TORCH_CHECK(tb != nullptr, "symbolize_stacks: not a stack recorded by memory history");
      unique.push_back(tb);
    }
  }
  torch::SymbolizedTracebacks s = torch::symbolize(unique);
  SymbolizedStacks out;
  out.frames.reserve(s.all_frames.size());
  for (auto& f : s.all_frames) {
    out.frames.push_back({std::move(f.filename), std::move(f.funcname), f.lineno});
  }
  out.stacks.reserve(contexts.size());
  for (const c10::GatheredContext* c : contexts) out.stacks.push_back(s.tracebacks.at(index.at(c)));
  return out;
}

void add_out_of_memory_observer(OutOfMemoryObserver observer) {
  attach_out_of_memory_observer(std::move(observer));
}

void set_memory_metadata(const std::string& metadata) {
  device_cache(vdev::rt::get_device()).set_user_metadata(metadata);
}

std::string memory_metadata() { return device_cache(vdev::rt::get_device()).user_metadata(); }

}  // namespace vdev::backend
