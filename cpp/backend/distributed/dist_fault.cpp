#include "backend/distributed/dist_fault.h"

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "backend/common/error_boundary.h"
#include "runtime/config.h"
#include "runtime/fault_injection.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

std::mutex g_mu;
bool g_decided = false;         // guarded by g_mu
vdev::rt::DistFault g_fault{};  // the armed fault: written under g_mu before the point is armed

std::string fault_text(const vdev::rt::DistFault& f) {
  return c10::str("VDEV_DIST_FAULT=", f.rank, ":", f.nth, ":",
                  f.mode == vdev::rt::DistFaultMode::kAbort ? "abort" : "hang");
}

}  // namespace

void arm_dist_fault(int global_rank, int world_size) {
  const std::optional<vdev::rt::DistFault>& fault = VDEV_RT(vdev::rt::config()).dist_fault;
  if (!fault) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_decided) return;
  TORCH_CHECK_VALUE(fault->rank < world_size, fault_text(*fault), " names rank ", fault->rank,
                    ", which this job does not have: its world has ", world_size, " rank(s), 0..",
                    world_size - 1);
  g_decided = true;
  if (global_rank != fault->rank) return;
  // A restarted attempt (torchrun --max-restarts) runs without the fault, so that it can succeed.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart != nullptr && *restart != '\0' && std::string(restart) != "0") return;
  g_fault = *fault;
  vdev::rt::arm_fault_after(vdev::rt::Fault::kCollective, fault->nth - 1);
}

bool take_dist_fault() noexcept {
  return vdev::rt::take_injected_fault(vdev::rt::Fault::kCollective);
}

void act_on_dist_fault(std::chrono::milliseconds timeout, const std::atomic<bool>& closed,
                       const char* name) {
  const vdev::rt::DistFault& f = g_fault;
  if (f.mode == vdev::rt::DistFaultMode::kAbort) {
    std::fprintf(stderr, "vccl %s: %s: rank %d exits at its collective %lld (status %d)\n", name,
                 fault_text(f).c_str(), f.rank, static_cast<long long>(f.nth), kDistFaultExitCode);
    std::fflush(nullptr);
    std::_Exit(kDistFaultExitCode);  // as a crashed process: no exit handler, no word to peers
  }
  // Hang: wait out the timeout, polling what ends the wait early (runtime/process.h's exit rule:
  // long waits inside tasks return once the process stops).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (closed.load() || vdev::rt::stopping()) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str("vccl ", name, ": the process group was shut down while its ",
                               "collective hung (", fault_text(f), ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  C10_THROW_ERROR(DistBackendError, c10::str("vccl ", name, ": timed out after ", timeout.count(),
                                             " ms: rank ", f.rank, "'s collective ", f.nth,
                                             " never arrived (injected by ", fault_text(f), ")"));
}

}  // namespace vdev::backend
