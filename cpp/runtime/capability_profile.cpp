#include "runtime/capability_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "runtime/errors.h"
#include "runtime/json_reader.h"

namespace vdev::rt {
namespace {

// ---- the built-in profiles ----------------------------------------------------------------------
// Names, memory and multiprocessor counts are what torch.cuda.get_device_properties prints on the
// real card (memory in MiB as it prints them: the driver keeps some of the board's memory), so
// programs that size batches from total_memory or match names behave as there.
CapabilityProfile builtin(const std::string& name) {
  CapabilityProfile p;
  p.id = name;
  if (name == "sm75") {  // an NVIDIA T4: Turing, no bfloat16 units (bf16 runs emulated)
    p.device_name = "Tesla T4";
    p.memory = "15095MiB";
    p.major = 7, p.minor = 5, p.multi_processor_count = 40;
    p.bf16_emulated = true;
  } else if (name == "sm80") {  // an NVIDIA A100 40GB (SXM4)
    p.device_name = "NVIDIA A100-SXM4-40GB";
    p.memory = "40536MiB";
    p.major = 8, p.minor = 0, p.multi_processor_count = 108;
  } else if (name == "sm90") {  // an NVIDIA H100 80GB (SXM5, HBM3)
    p.device_name = "NVIDIA H100 80GB HBM3";
    p.memory = "81089MiB";
    p.major = 9, p.minor = 0, p.multi_processor_count = 132;
  } else if (name == "mps") {
    // An Apple GPU through MPS: an M2 Pro (19 GPU cores) in a 32 GB Mac, whose memory for the GPU
    // is Metal's recommendedMaxWorkingSetSize there, two thirds of the unified memory (22906.5 MB,
    // what torch.mps.recommended_max_memory() reports). MPS has no float64 and no complex128
    // (aten/src/ATen/mps/EmptyTensor.cpp, native/mps/OperationUtils.mm); it has no CUDA compute
    // capability: (0, 0).
    p.device_name = "Apple M2 Pro";
    p.memory = "21845MiB";
    p.major = 0, p.minor = 0, p.multi_processor_count = 19;
    p.unsupported_dtypes = {"float64", "complex128"};
  }
  return p;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// ---- from JSON to a CapabilityProfile
// -------------------------------------------------------------------
std::string keys() {
  return joined(
      {"name", "capability", "memory", "multi_processor_count", "dtypes", "missing_operators"});
}

[[noreturn]] void bad_field(const std::string& source, const char* key, const std::string& what) {
  fail<std::invalid_argument>("config", "VDEV_PROFILE='", source, "': \"", key, "\" ", what);
}

// A string of the profile as UTF-8 text: the device name reaches Python (get_device_name), which
// cannot decode anything else, so a file saved in another encoding (Latin-1) is refused here,
// when it is read, not at the first call that returns the name.
const std::string& utf8_text(const std::string& text, const std::string& source, const char* key) {
  std::size_t at = 0;
  if (!is_valid_utf8(text, &at)) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const auto b = static_cast<unsigned char>(text[at]);
    bad_field(source, key,
              std::string("is not valid UTF-8 (byte 0x") + kHex[b >> 4] + kHex[b & 0xF] +
                  " at offset " + std::to_string(at) + " of '" + text +
                  "'): a profile's strings must be UTF-8 text (save the file as UTF-8, or write "
                  "the character as a \\u escape)");
  }
  return text;
}

int small_int(const Json& v, const std::string& source, const char* key, int lo, int hi,
              const char* must) {
  if (v.kind != Json::kNumber || !v.integral || v.negative || !v.fits ||
      v.magnitude < static_cast<unsigned long long>(lo) ||
      v.magnitude > static_cast<unsigned long long>(hi)) {
    bad_field(source, key, must);
  }
  return static_cast<int>(v.magnitude);
}

// An array of strings; `must` says what they name when it is not one.
std::vector<std::string> names(const Json& v, const std::string& source, const char* key,
                               const std::string& must) {
  if (v.kind != Json::kArray) bad_field(source, key, must);
  std::vector<std::string> out;
  for (const Json& item : v.items) {
    if (item.kind != Json::kString) bad_field(source, key, must);
    out.push_back(utf8_text(item.text, source, key));
  }
  return out;
}

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// "namespace::name" or "namespace::name.overload", as the dispatcher names operators.
bool is_operator_name(const std::string& s) {
  const std::size_t sep = s.find("::");
  if (sep == std::string::npos) return false;
  const std::string ns = s.substr(0, sep);
  std::string rest = s.substr(sep + 2);
  const std::size_t dot = rest.find('.');
  if (dot != std::string::npos) {
    if (!is_identifier(rest.substr(dot + 1))) return false;
    rest = rest.substr(0, dot);
  }
  return is_identifier(ns) && is_identifier(rest);
}

}  // namespace

std::string CapabilityProfile::describe() const {
  const bool from_file = id.size() > 5 && id.compare(id.size() - 5, 5, ".json") == 0;
  if (!from_file) return "'" + id + "'";
  return "'" + device_name + "' (VDEV_PROFILE=" + id + ")";
}

const std::vector<std::string>& profile_names() {
  static const std::vector<std::string> n = {"default", "sm75", "sm80", "sm90", "mps"};
  return n;
}

const std::vector<std::string>& profile_dtype_names() {
  static const std::vector<std::string> n = {
      "bool",          "uint8",         "int8",        "int16",           "int32",
      "int64",         "uint16",        "uint32",      "uint64",          "float16",
      "bfloat16",      "float32",       "float64",     "complex32",       "complex64",
      "complex128",    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
      "float8_e8m0fnu"};
  return n;
}

CapabilityProfile parse_profile_json(const std::string& text, const std::string& source) {
  // A UTF-8 byte-order mark (what some Windows editors write first) is skipped, as Python's json
  // skips it in bytes (json.loads decodes them as utf-8-sig): it says the file is UTF-8.
  const bool bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0;
  const Json doc = read_json(bom ? text.substr(3) : text, "VDEV_PROFILE='" + source + "'");
  if (doc.kind != Json::kObject) {
    fail<std::invalid_argument>("config", "VDEV_PROFILE='", source,
                                "': a profile is a JSON object with the keys ", keys());
  }
  CapabilityProfile p;
  p.id = source;
  bool named = false;
  for (const auto& [key, v] : doc.members) {
    if (key == "name") {
      if (v.kind != Json::kString || blank(v.text)) {
        bad_field(source, "name", "must be a non-empty string (the device name, not only spaces)");
      }
      p.device_name = utf8_text(v.text, source, "name");
      named = true;
    } else if (key == "capability") {
      const char* must = "must be [major, minor], two integers in 0..99";
      if (v.kind != Json::kArray || v.items.size() != 2) bad_field(source, "capability", must);
      p.major = small_int(v.items[0], source, "capability", 0, 99, must);
      p.minor = small_int(v.items[1], source, "capability", 0, 99, must);
    } else if (key == "memory") {
      // Checked as VDEV_DEVICE_MEMORY is (runtime/config.h), when the configuration is read; an
      // empty string is refused here, as the CapabilityProfile's empty memory means "the default".
      const char* must =
          "must be a positive number of bytes (1 up to 2^64-1) or a size such as \"16GiB\" (units "
          "K, M, G or T, binary)";
      if (v.kind == Json::kNumber && v.integral && !v.negative) {
        p.memory = v.text;
      } else if (v.kind == Json::kString && !blank(v.text)) {
        p.memory = utf8_text(v.text, source, "memory");
      } else {
        bad_field(source, "memory", must);
      }
    } else if (key == "multi_processor_count") {
      p.multi_processor_count = small_int(v, source, "multi_processor_count", 1, 1 << 20,
                                          "must be an integer in 1..1048576");
    } else if (key == "dtypes") {
      const std::vector<std::string>& all = profile_dtype_names();
      const std::vector<std::string> supported =
          names(v, source, "dtypes", "must be an array of dtype names, from " + joined(all));
      // A device without a dtype could hold no tensor at all: not a description of a device.
      if (supported.empty()) {
        bad_field(source, "dtypes", "must name at least one dtype, from " + joined(all));
      }
      for (const std::string& d : supported) {
        if (std::find(all.begin(), all.end(), d) == all.end()) {
          bad_field(source, "dtypes",
                    "names an unknown dtype '" + d + "': the dtypes are " + joined(all));
        }
      }
      for (const std::string& d : all) {
        if (std::find(supported.begin(), supported.end(), d) == supported.end()) {
          p.unsupported_dtypes.push_back(d);
        }
      }
    } else if (key == "missing_operators") {
      p.missing_operators = names(v, source, "missing_operators",
                                  "must be an array of operator names, \"namespace::name\" or "
                                  "\"namespace::name.overload\" (aten::cumsum, aten::add.Tensor)");
      for (const std::string& op : p.missing_operators) {
        if (!is_operator_name(op)) {
          bad_field(source, "missing_operators",
                    "names '" + op +
                        "', which is not an operator name: expected \"namespace::name\" or "
                        "\"namespace::name.overload\" (aten::cumsum, aten::add.Tensor)");
        }
      }
    } else {
      fail<std::invalid_argument>("config", "VDEV_PROFILE='", source, "': unknown key \"", key,
                                  "\": the keys are ", keys());
    }
  }
  if (!named) {
    fail<std::invalid_argument>("config", "VDEV_PROFILE='", source,
                                "': \"name\" (the device name) is required");
  }
  return p;
}

CapabilityProfile load_profile(const std::string& value) {
  std::string v = value;
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  v.erase(0, std::min(v.size(), v.find_first_not_of(" \t\r\n")));
  if (v.empty()) return builtin("default");
  // The value becomes the profile's id, which Python reads back (str) and messages quote.
  if (std::size_t at = 0; !is_valid_utf8(v, &at)) {
    fail<std::invalid_argument>("config", "VDEV_PROFILE='", value, "' is not valid UTF-8 (at byte ",
                                at,
                                "): expected a built-in profile name or the path of a JSON profile "
                                "ending in .json, in UTF-8");
  }
  const std::vector<std::string>& known = profile_names();
  if (std::find(known.begin(), known.end(), v) != known.end()) return builtin(v);
  if (v.size() > 5 && v.compare(v.size() - 5, 5, ".json") == 0) {
    std::ifstream in(v, std::ios::binary);
    if (!in) {
      fail<std::invalid_argument>("config", "VDEV_PROFILE='", value,
                                  "': cannot read the profile file");
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
      fail<std::invalid_argument>("config", "VDEV_PROFILE='", value,
                                  "': cannot read the profile file");
    }
    return parse_profile_json(text.str(), v);
  }
  fail<std::invalid_argument>("config", "VDEV_PROFILE='", value,
                              "' is not a known profile: expected one of ", joined(known),
                              ", or the path of a JSON profile ending in .json");
}

}  // namespace vdev::rt
