#include "backend/common/worker_warnings.h"

#include "backend/common/alert_filter.h"

#include <mutex>
#include <string>
#include <utility>
#include "runtime/process.h"

namespace vdev::backend {
namespace {

struct Pending {
  std::mutex mu;
  std::vector<c10::Warning> warnings;
};

Pending& pending() {
  // Leaked: workers may warn until exit.
  static Pending* p =
      vdev::rt::new_leaked_with_fork_lock<Pending>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *p;
}

// A runaway kernel warning in a loop must not grow memory without bound: beyond this, the oldest
// are kept and the rest counted into one last warning.
constexpr std::size_t kMaxPending = 1024;

}  // namespace

CaptureWorkerWarnings::CaptureWorkerWarnings(const char* task_name, int device,
                                             std::int64_t stream_id)
    : previous_(c10::WarningUtils::get_warning_handler()),
      task_name_(task_name),
      device_(device),
      stream_id_(stream_id) {
  c10::WarningUtils::set_warning_handler(this);
}

CaptureWorkerWarnings::~CaptureWorkerWarnings() {
  c10::WarningUtils::set_warning_handler(previous_);
}

void CaptureWorkerWarnings::process(const c10::Warning& warning) {
  if (is_nondeterminism_alert(warning)) return;  // raised on the host at the call
  std::string msg = warning.msg();
  msg += " (raised by ";
  msg += task_name_;
  msg += ", queued on vdev:" + std::to_string(device_) + " stream " + std::to_string(stream_id_);
  msg += ")";
  c10::Warning located(warning.type(), warning.source_location(), std::move(msg),
                       warning.verbatim());
  std::lock_guard<std::mutex> lock(pending().mu);
  std::vector<c10::Warning>& list = pending().warnings;
  if (list.size() < kMaxPending) {
    list.push_back(std::move(located));
  } else if (list.size() == kMaxPending) {
    list.emplace_back(c10::Warning::UserWarning{}, warning.source_location(),
                      "further warnings from queued vdev kernels were dropped (more than " +
                          std::to_string(kMaxPending) + " between two synchronizations)",
                      /*verbatim=*/true);
  }
}

std::vector<c10::Warning> take_worker_warnings() {
  std::lock_guard<std::mutex> lock(pending().mu);
  return std::exchange(pending().warnings, {});
}

void reraise_worker_warnings() {
  {
    std::lock_guard<std::mutex> lock(pending().mu);
    if (pending().warnings.empty()) return;
  }
  for (const c10::Warning& w : take_worker_warnings()) c10::warn(w);
}

}  // namespace vdev::backend
