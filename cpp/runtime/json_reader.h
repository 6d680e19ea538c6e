// A small JSON reader (RFC 8259; what a capability profile file needs,
// runtime/capability_profile.h): the document as a tree of values, numbers kept as text with their
// integral magnitude when it fits, strings decoded (escapes, surrogate pairs) to UTF-8.
//
// Thread rules: stateless; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace vdev::rt {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  bool integral = false;  // a number without fraction or exponent
  bool negative = false;
  unsigned long long magnitude = 0;  // of an integral number that fits
  bool fits = true;
  std::string text;  // a string's value, a number's text
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
};

// The document `text`; invalid JSON throws std::invalid_argument (ValueError) naming `source`
// ("<source> is not valid JSON: <what> at line L, column C").
Json read_json(const std::string& text, const std::string& source);

}  // namespace vdev::rt
