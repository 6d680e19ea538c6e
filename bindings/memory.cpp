#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/memory/allocator.h"
#include "backend/memory/host_allocator.h"
#include "backend/memory/ipc_sharing.h"
#include "backend/memory/memory_history.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

// SharedStorageHandle as Python sees it (torch_vdev/vdev/_sending.py pickles it).
using HandleTuple =
    std::tuple<int, int, std::uint64_t, std::uint64_t, int, std::uint32_t, std::uint32_t, int>;

HandleTuple to_tuple(const backend::SharedStorageHandle& h) {
  return {h.device, h.memory_fd, h.offset, h.nbytes, h.slot_fd, h.slot, h.generation, h.sender_pid};
}

backend::SharedStorageHandle from_tuple(const HandleTuple& t) {
  const auto& [device, memory_fd, offset, nbytes, slot_fd, slot, generation, pid] = t;
  return {device, memory_fd, offset, nbytes, slot_fd, slot, generation, pid};
}

// A Python UntypedStorage's _cdata: the c10::StorageImpl it wraps (the caller keeps it alive).
c10::StorageImpl& storage_of(std::uintptr_t cdata) {
  return *reinterpret_cast<c10::StorageImpl*>(cdata);
}

void bind_ipc(nb::module_& m) {
  m.def(
      "_ipc_share_storage",
      [](std::uintptr_t cdata) { return to_tuple(backend::share_storage(storage_of(cdata))); },
      nb::arg("storage_cdata"), nb::call_guard<nb::gil_scoped_release>(),
      "Names a vdev storage's bytes for another process (backend/memory/ipc_sharing.h).");
  m.def(
      "_ipc_adopt_storage",
      [](std::uintptr_t cdata, const HandleTuple& h, int memory_fd, int slot_fd) {
        backend::adopt_shared_storage(storage_of(cdata), from_tuple(h), memory_fd, slot_fd);
      },
      nb::arg("empty_storage_cdata"), nb::arg("handle"), nb::arg("memory_fd"), nb::arg("slot_fd"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "_ipc_wait_and_release",
      [](const HandleTuple& h, int slot_fd) { backend::wait_and_release(from_tuple(h), slot_fd); },
      nb::arg("handle"), nb::arg("slot_fd"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "_ipc_give_back",
      [](const HandleTuple& h, int slot_fd) {
        backend::give_back_reference(from_tuple(h), slot_fd);
      },
      nb::arg("handle"), nb::arg("slot_fd"));
  m.def("_ipc_collect", &backend::collect_shared, nb::call_guard<nb::gil_scoped_release>(),
        "Frees the shared blocks no receiver holds any more; True if any was freed.");
  m.def("_ipc_in_limbo", &backend::shared_in_limbo);
}

// A memory snapshot as the dictionary torch.cuda.memory._snapshot returns: the keys, values and
// nesting of torch/csrc/cuda/memory_snapshot.cpp, which torch.cuda._memory_viz and PyTorch's
// memory viewer read. Dictionaries with a recorded stack get their "frames" at the end, once all
// stacks are symbolized together (frames shared between stacks are shared objects).
nb::dict snapshot_dict(const backend::MemorySnapshot& snap) {
  std::vector<const c10::GatheredContext*> stacks;
  std::vector<nb::dict> stack_owners;
  const nb::list no_frames;
  auto frames_of = [&](nb::dict& d, const std::shared_ptr<c10::GatheredContext>& context) {
    if (context) {
      stacks.push_back(context.get());
      stack_owners.push_back(d);
    } else {
      d["frames"] = no_frames;
    }
  };

  nb::list segments;
  for (const auto& seg : snap.segments) {
    nb::dict d;
    d["device"] = seg.device;
    d["address"] = seg.address;
    d["total_size"] = seg.total_size;
    d["allocated_size"] = seg.allocated_size;
    d["active_size"] = seg.active_size;
    d["requested_size"] = seg.requested_size;
    d["stream"] = reinterpret_cast<std::intptr_t>(seg.stream);
    d["segment_type"] = seg.is_large ? "large" : "small";
    d["segment_pool_id"] =
        nb::make_tuple(seg.owner_private_pool_id.first, seg.owner_private_pool_id.second);
    d["is_expandable"] = seg.is_expandable;
    frames_of(d, seg.context_when_allocated);
    nb::list blocks;
    std::size_t address = seg.address;
    for (const auto& b : seg.blocks) {
      nb::dict bd;
      bd["address"] = address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested_size;
      bd["state"] =
          b.allocated ? "active_allocated" : (b.active ? "active_pending_free" : "inactive");
      frames_of(bd, b.context_when_allocated);
      blocks.append(bd);
      address += b.size;
    }
    d["blocks"] = blocks;
    segments.append(d);
  }

  nb::list traces;
  for (const auto& trace : snap.device_traces) {
    nb::list entries;
    for (const auto& te : trace) {
      nb::dict e;
      e["action"] = backend::trace_action_name(te.action_);
      // An oom entry carries the device's free bytes where the others carry an address.
      e[te.action_ == backend::TraceEntry::OOM ? "device_free" : "addr"] = te.addr_;
      e["size"] = te.size_;
      e["stream"] = reinterpret_cast<std::intptr_t>(te.stream_);
      e["compile_context"] = te.compile_context_;
      e["user_metadata"] = te.user_metadata_;
      if (te.context_) {
        stacks.push_back(te.context_.get());
        stack_owners.push_back(e);
      }
      e["time_us"] = static_cast<std::int64_t>(te.time_.t_);
      entries.append(e);
    }
    traces.append(entries);
  }

  nb::list annotations;
  for (const auto& ae : snap.annotations) {
    nb::dict a;
    for (const auto& [key, value] : ae.metadata_) a[key.c_str()] = value;
    a["device"] = ae.device_;
    a["time_us"] = static_cast<std::int64_t>(ae.time_.t_);
    annotations.append(a);
  }

  // CUDA's keys, with vdev's allocator: no expandable segments, no rounding divisions, no garbage
  // collection threshold; any block may be split.
  nb::dict settings;
  settings["PYTORCH_CUDA_ALLOC_CONF"] = "";
  settings["max_split_size"] = snap.max_split_size;
  settings["garbage_collection_threshold"] = 0.0;
  settings["expandable_segments"] = false;
  settings["pinned_num_register_threads"] = 1;
  settings["release_lock_on_cudamalloc"] = false;
  settings["pinned_use_cuda_host_register"] = false;
  settings["roundup_power2_divisions"] = nb::dict();
  settings["graph_capture_record_stream_reuse"] = false;

  nb::dict result;
  result["segments"] = segments;
  result["device_traces"] = traces;
  result["allocator_settings"] = settings;
  result["external_annotations"] = annotations;

  const backend::SymbolizedStacks sym = backend::symbolize_stacks(stacks);
  std::vector<nb::dict> frames;
  frames.reserve(sym.frames.size());
  for (const auto& f : sym.frames) {
    nb::dict fd;
    fd["filename"] = f.filename;
    fd["name"] = f.name;
    fd["line"] = f.line;
    frames.push_back(fd);
  }
  for (std::size_t i = 0; i < stack_owners.size(); ++i) {
    nb::list l;
    for (std::uint64_t k : sym.stacks[i]) l.append(frames.at(k));
    stack_owners[i]["frames"] = l;
  }
  return result;
}

void bind_history(nb::module_& m) {
  m.def(
      "_trace_actions",
      [] {
        using A = backend::TraceEntry::Action;
        std::vector<std::string> names;
        for (int a = static_cast<int>(A::ALLOC); a <= static_cast<int>(A::OOM); ++a) {
          names.emplace_back(backend::trace_action_name(static_cast<A>(a)));
        }
        return names;
      },
      "The memory history's trace actions by CUDA's names (skip_actions takes them).");
  m.def(
      "_record_memory_history",
      [](bool enabled, int when, bool cpp_stacks, std::size_t max_entries, bool clear_history,
         bool compile_context, bool global_record_annotations,
         const std::vector<std::string>& skip_actions) {
        backend::MemoryHistoryOptions o;
        o.enabled = enabled;
        o.when = static_cast<backend::RecordContext>(when);
        o.cpp_stacks = cpp_stacks;
        o.max_entries = max_entries;
        o.clear_history = clear_history;
        o.compile_context = compile_context;
        o.global_record_annotations = global_record_annotations;
        o.skip_actions = skip_actions;
        // Waits for each device's cache lock, which empty_cache may hold while the device drains.
        nb::gil_scoped_release release;
        backend::record_memory_history(o);
      },
      nb::arg("enabled"), nb::arg("when"), nb::arg("cpp_stacks"), nb::arg("max_entries"),
      nb::arg("clear_history"), nb::arg("compile_context"), nb::arg("global_record_annotations"),
      nb::arg("skip_actions"),
      "Starts, changes or stops memory history on every device (torch_vdev/vdev/memory.py "
      "checks the arguments; `when` is a c10 RecordContext).");
  m.def("_memory_history_enabled", &backend::memory_history_enabled);
  m.def(
      "_memory_snapshot",
      [](bool include_traces) {
        backend::MemorySnapshot snap;
        {
          nb::gil_scoped_release release;  // as _record_memory_history
          snap = backend::memory_snapshot(include_traces);
        }
        return snapshot_dict(snap);  // symbolizing Python frames needs the GIL
      },
      nb::arg("include_traces") = true,
      "Every device's segments, blocks and recorded history in torch.cuda's snapshot schema.");
  m.def(
      "_attach_out_of_memory_observer",
      [](nb::callable observer) {
        // Observers stay attached for the life of the process, as CUDA's: the reference is never
        // dropped (an observer may run during interpreter teardown).
        PyObject* fn = observer.release().ptr();
        backend::add_out_of_memory_observer([fn](std::int64_t device, std::size_t requested,
                                                 std::size_t allowed, std::size_t device_free) {
          if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
          nb::gil_scoped_acquire gil;
          try {
            const nb::handle callable(fn);
            callable(device, requested, allowed, device_free);
          } catch (nb::python_error& e) {
            // The out-of-memory error is what the allocation raises; the observer's own
            // error is reported the way Python reports errors it cannot raise.
            e.discard_as_unraisable("torch.vdev out-of-memory observer");
          }
        });
      },
      nb::arg("observer"),
      "Calls observer(device, requested, allowed, device_free) before an out-of-memory error "
      "is raised.");
  m.def("_set_memory_metadata", &backend::set_memory_metadata, nb::arg("metadata"));
  m.def("_get_memory_metadata", &backend::memory_metadata);
}

}  // namespace

void bind_memory(nb::module_& m) {
  m.def("_set_memory_fraction", &backend::set_memory_fraction, nb::arg("fraction"),
        nb::arg("device"), "Limits what this process may reserve on the device (0..1).");
  m.def("_get_memory_fraction", &backend::memory_fraction, nb::arg("device"));
  m.def("_exchange_injected_oom", &backend::exchange_injected_oom, nb::arg("after"),
        "The allocation after the next `after` ones raises out of memory, once (-1: none); "
        "returns the count it replaces.");
  m.def(
      "_empty_cache", [] { backend::device_allocator()->emptyCache({0, 0}); },
      nb::call_guard<nb::gil_scoped_release>(),
      "Returns unused cached device memory of every device (waits for queued work first).");
  m.def(
      "_host_memory_stats",
      [] {
        const at::HostStats s = backend::pinned_host_allocator()->get_stats();
        nb::dict d;
        const std::pair<const char*, const c10::CachingAllocator::Stat*> stats[] = {
            {"allocations", &s.allocations},
            {"allocated_bytes", &s.allocated_bytes},
            {"active_requests", &s.active_requests},
            {"active_bytes", &s.active_bytes}};
        for (const auto& [name, st] : stats) {
          const std::string n(name);
          d[(n + ".current").c_str()] = st->current;
          d[(n + ".peak").c_str()] = st->peak;
          d[(n + ".allocated").c_str()] = st->allocated;
          d[(n + ".freed").c_str()] = st->freed;
        }
        d["num_host_alloc"] = s.num_host_alloc;
        d["num_host_free"] = s.num_host_free;
        return d;
      },
      "Statistics of the pinned host allocator, keyed as torch.cuda.host_memory_stats.");
  m.def("_reset_peak_host_memory_stats",
        [] { backend::pinned_host_allocator()->reset_peak_stats(); });
  m.def("_reset_accumulated_host_memory_stats",
        [] { backend::pinned_host_allocator()->reset_accumulated_stats(); });
  bind_ipc(m);
  bind_history(m);
}

}  // namespace vdev::bindings
