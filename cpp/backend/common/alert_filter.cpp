#include "backend/common/alert_filter.h"

#include <string>

namespace vdev::backend {

SilenceNondeterminismAlerts::SilenceNondeterminismAlerts()
    : previous_(c10::WarningUtils::get_warning_handler()) {
  c10::WarningUtils::set_warning_handler(this);
}

SilenceNondeterminismAlerts::~SilenceNondeterminismAlerts() {
  c10::WarningUtils::set_warning_handler(previous_);
}

bool is_nondeterminism_alert(const c10::Warning& warning) {
  // at::Context::alertNotDeterministic's wording (aten/src/ATen/Context.cpp).
  return warning.msg().find("does not have a deterministic implementation") != std::string::npos;
}

void SilenceNondeterminismAlerts::process(const c10::Warning& warning) {
  if (!is_nondeterminism_alert(warning)) previous_->process(warning);
}

}  // namespace vdev::backend
