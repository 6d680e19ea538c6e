#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "backend/memory/allocator.h"
#include "backend/memory/host_allocator.h"
#include "backend/memory/ipc_sharing.h"
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

}  // namespace

void bind_memory(nb::module_& m) {
  m.def("_set_memory_fraction", &backend::set_memory_fraction, nb::arg("fraction"),
        nb::arg("device"), "Limits what this process may reserve on the device (0..1).");
  m.def("_get_memory_fraction", &backend::memory_fraction, nb::arg("device"));
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
}

}  // namespace vdev::bindings
