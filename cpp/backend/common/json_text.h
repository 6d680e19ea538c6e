// A JSON string literal of any text: what vdev writes into JSON others read (the profiler's
// "deviceProperties", the sanitize CLI's findings files). Quotes, backslashes and control
// characters are escaped; bytes that are not UTF-8 are written as \xNN text first
// (runtime/errors.h's printable_utf8), so the result is always valid JSON.
//
// Thread rules: stateless.
#pragma once

#include <string>

namespace vdev::backend {

std::string json_string(const std::string& text);

}  // namespace vdev::backend
