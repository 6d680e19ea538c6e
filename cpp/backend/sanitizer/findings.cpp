#include "backend/sanitizer/findings.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>

#include "backend/sanitizer/findings_file.h"
#include "backend/sanitizer/settings.h"

namespace vdev::backend {
namespace {

std::atomic<FindingRaiser> g_raiser{nullptr};
thread_local bool t_force_warnings = false;

struct Kept {
  std::mutex mu;
  std::vector<Finding> findings;  // guarded by mu
  std::size_t count = 0;          // guarded by mu
};

Kept& kept() {
  static Kept* k = new Kept;  // leaked: findings may be reported during interpreter teardown
  return *k;
}

}  // namespace

void set_finding_raiser(FindingRaiser raiser) { g_raiser.store(raiser); }

ForceFindingWarnings::ForceFindingWarnings() : before_(t_force_warnings) {
  t_force_warnings = true;
}
ForceFindingWarnings::~ForceFindingWarnings() { t_force_warnings = before_; }

void report_finding(FindingKind kind, const std::string& message) {
  {
    Kept& k = kept();
    std::lock_guard<std::mutex> lock(k.mu);
    ++k.count;
    if (k.findings.size() < kMaxKeptFindings) k.findings.push_back({kind, message});
  }
  // For python -m torch_vdev.sanitize (findings_file.h).
  append_finding_to_file(static_cast<int>(kind), message, kMaxKeptFindings);
  if (sanitizer_warns() || t_force_warnings) {
    TORCH_WARN(message);
    return;
  }
  if (FindingRaiser raise = g_raiser.load()) raise(kind, message);
  TORCH_CHECK(false, message);
}

std::vector<Finding> kept_findings() {
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  return k.findings;
}

std::size_t finding_count() {
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  return k.count;
}

void clear_findings() {
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  k.findings.clear();
  k.count = 0;
}

}  // namespace vdev::backend
