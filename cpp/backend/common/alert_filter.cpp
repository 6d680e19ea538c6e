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

void SilenceNondeterminismAlerts::process(const c10::Warning& warning) {
  // at::Context::alertNotDeterministic's wording (aten/src/ATen/Context.cpp).
  if (warning.msg().find("does not have a deterministic implementation") != std::string::npos) {
    return;
  }
  previous_->process(warning);
}

}  // namespace vdev::backend
