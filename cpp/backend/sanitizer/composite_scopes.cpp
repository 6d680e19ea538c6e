#include "backend/sanitizer/composite_scopes.h"

#include <ATen/record_function.h>

#include <memory>
#include <optional>
#include <string_view>

#include "backend/sanitizer/allocation_numbers.h"

namespace vdev::backend {
namespace {

std::optional<at::CallbackHandle> g_handle;  // guarded by the settings' mutex

// The floor of the innermost such operator running on this thread (0: none).
thread_local std::uint64_t t_floor = 0;

bool reads_own_fresh_memory(std::string_view name) { return name == "aten::_pad_circular"; }

struct Outer : at::ObserverContext {
  explicit Outer(std::uint64_t f) : floor(f) {}
  std::uint64_t floor;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!reads_own_fresh_memory(fn.name())) return nullptr;
  auto outer = std::make_unique<Outer>(t_floor);
  if (t_floor == 0) t_floor = next_allocation_number();
  return outer;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr) t_floor = static_cast<Outer*>(ctx)->floor;
}

}  // namespace

void watch_composites(bool on) {
  if (on && !g_handle) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end).scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_handle) {
    at::removeCallback(*g_handle);
    g_handle.reset();
  }
}

std::uint64_t unchecked_allocations_from() { return t_floor; }

}  // namespace vdev::backend
