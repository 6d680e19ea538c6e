#include "backend/common/json_text.h"

#include <cstdio>

#include "runtime/errors.h"

namespace vdev::backend {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : vdev::rt::printable_utf8(text)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace vdev::backend
