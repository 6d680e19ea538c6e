#include "runtime/config.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>

#include "runtime/errors.h"
#include "runtime/machine_load.h"

namespace vdev::rt {
namespace {

constexpr int kMaxRank = std::numeric_limits<int>::max();  // VDEV_DIST_FAULT's RANK

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Digits only: no sign, no spaces inside, no hex. Returns false on overflow or empty input.
bool parse_unsigned(const std::string& digits, unsigned long long* out) {
  if (digits.empty()) return false;
  unsigned long long v = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    unsigned d = static_cast<unsigned>(c - '0');
    if (v > (std::numeric_limits<unsigned long long>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// Digits only (an integer without sign): what parse_unsigned refuses for this alone is too large.
bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// Whether `bytes` of address space can be reserved now (no memory is committed: PROT_NONE,
// MAP_NORESERVE), the way the arenas reserve theirs (runtime/arena.h).
bool can_reserve(unsigned long long bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max()) return false;
  void* p = mmap(nullptr, static_cast<std::size_t>(bytes), PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  munmap(p, static_cast<std::size_t>(bytes));
  return true;
}

// Every device reserves two views of its memory (runtime/arena.h): a size the machine cannot
// map would report the devices available and then fail every allocation, so it is refused here,
// naming the largest size that fits (found by bisection over reservations). `source` names where
// the size came from (VDEV_DEVICE_MEMORY, the profile's "memory", or vdev's default), so that the
// message blames what the user set; `hint` ends the message.
void check_address_space(const Config& c, const std::string& source, const std::string& hint) {
  constexpr unsigned long long kGranule = 2ULL << 20;  // the arenas' 2 MiB granularity
  const unsigned long long views = 2ULL * static_cast<unsigned long long>(c.device_count);
  const unsigned long long max_granules =
      std::numeric_limits<unsigned long long>::max() / views / kGranule;
  const unsigned long long want =
      std::min<unsigned long long>((c.device_memory + kGranule - 1) / kGranule, max_granules);
  if (want * kGranule >= c.device_memory && can_reserve(want * kGranule * views)) return;
  unsigned long long fits = 0, fails = want;  // in granules per device
  while (fails - fits > 1) {
    const unsigned long long mid = fits + (fails - fits) / 2;
    (can_reserve(mid * kGranule * views) ? fits : fails) = mid;
  }
  // What fits moves a little from one process to the next (address-space layout): the size named
  // keeps an eighth in hand, so that it works when used.
  fail<std::invalid_argument>("config", source, " of ", c.device_memory,
                              " bytes is more than this machine can reserve for ", c.device_count,
                              " device(s), two views of each device's memory: at most ",
                              (fits * kGranule / 8 * 7) >> 30, " GiB per device", hint);
}

// An integer in 1..max; the error names the variable, the value, what it counts and the range.
int parse_count(const std::string& text, const char* what, int max, const char* noun) {
  unsigned long long v = 0;
  if (!parse_unsigned(trim(text), &v) || v < 1 || v > static_cast<unsigned long long>(max)) {
    fail<std::invalid_argument>("config", what, "='", text, "' is not a valid ", noun,
                                ": expected an integer in 1..", max);
  }
  return static_cast<int>(v);
}

struct Loaded {
  // By name: a field added to Config cannot take another's value.
  Config config{.device_count = kDefaultDeviceCount,
                .device_memory = kDefaultDeviceMemory,
                .launch_blocking = false,
                .device_threads = default_device_threads(),
                .profile = {}};
  std::optional<std::string> error;
};

std::atomic<bool> g_read{false};

const Loaded& loaded() {
  static const Loaded instance = [] {
    g_read.store(true, std::memory_order_relaxed);
    Loaded l;
    try {
      if (const char* v = std::getenv("VDEV_DEVICE_COUNT")) {
        l.config.device_count = parse_device_count(v, "VDEV_DEVICE_COUNT");
      }
      // Where the device memory comes from, as the address-space check names it.
      std::string memory_source = "the default device memory";
      std::string memory_hint = " (set VDEV_DEVICE_MEMORY to change it)";
      if (const char* v = std::getenv("VDEV_PROFILE")) {
        l.config.profile = load_profile(v);
        const std::string& memory = l.config.profile.memory;
        if (!memory.empty()) {
          const std::string what = "VDEV_PROFILE='" + l.config.profile.id + "': \"memory\"";
          l.config.device_memory = parse_memory_size(memory, what.c_str());
          memory_source = what;
          memory_hint = " (VDEV_DEVICE_MEMORY, if set, wins over the profile's memory)";
        }
      }
      if (const char* v = std::getenv("VDEV_DEVICE_MEMORY")) {  // wins over the profile's
        l.config.device_memory = parse_memory_size(v, "VDEV_DEVICE_MEMORY");
        memory_source = "VDEV_DEVICE_MEMORY";
        memory_hint.clear();
      }
      if (const char* v = std::getenv("VDEV_LAUNCH_BLOCKING")) {
        const std::string s = trim(v);
        if (s != "0" && s != "1" && !s.empty()) {
          fail<std::invalid_argument>("config", "VDEV_LAUNCH_BLOCKING='", v,
                                      "' is not valid: expected 0 or 1");
        }
        l.config.launch_blocking = s == "1";
      }
      if (const char* v = std::getenv("VDEV_STICKY_ASSERTS")) {
        const std::string s = trim(v);
        if (s != "0" && s != "1" && !s.empty()) {
          fail<std::invalid_argument>("config", "VDEV_STICKY_ASSERTS='", v,
                                      "' is not valid: expected 0 or 1");
        }
        l.config.sticky_asserts = s != "0";
      }
      if (const char* v = std::getenv("VDEV_DEVICE_THREADS")) {
        l.config.device_threads = parse_thread_count(v, "VDEV_DEVICE_THREADS");
        l.config.device_threads_set = true;
      }
      if (const char* v = std::getenv("VDEV_SANITIZER")) {
        l.config.sanitizer = parse_sanitizer_flags(v, "VDEV_SANITIZER");
      }
      if (const char* v = std::getenv("VDEV_OOM_AFTER"); v != nullptr && !trim(v).empty()) {
        l.config.oom_after = parse_oom_after(v, "VDEV_OOM_AFTER");
      }
      if (const char* v = std::getenv("VDEV_DIST_FAULT"); v != nullptr && !trim(v).empty()) {
        l.config.dist_fault = parse_dist_fault(v, "VDEV_DIST_FAULT");
      }
      check_address_space(l.config, memory_source, memory_hint);
    } catch (const std::exception& e) {
      l.error = e.what();
    }
    return l;
  }();
  return instance;
}

}  // namespace

unsigned parse_sanitizer_flags(const std::string& text, const char* what) {
  static constexpr std::pair<const char*, unsigned> kNames[] = {{"streams", kSanitizeStreams},
                                                                {"init", kSanitizeInit},
                                                                {"poison", kSanitizePoison},
                                                                {"warn", kSanitizeWarn}};
  unsigned flags = 0;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string name = trim(text.substr(begin, end - begin));
    if (!name.empty()) {
      unsigned bit = 0;
      for (const auto& [n, b] : kNames) {
        if (name == n) bit = b;
      }
      if (bit == 0) {
        fail<std::invalid_argument>("config", what, "='", text, "' is not valid: unknown tool '",
                                    name,
                                    "'; expected a comma-separated list of streams, init, poison "
                                    "and warn");
      }
      flags |= bit;
    }
    begin = end + 1;
  }
  return flags;
}

int parse_device_count(const std::string& text, const char* what) {
  return parse_count(text, what, kMaxDevices, "device count");
}

std::size_t parse_memory_size(const std::string& text, const char* what) {
  const std::string t = trim(text);
  std::size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  std::string unit = trim(t.substr(i));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  bool unit_ok = true;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else {
    switch (unit[0]) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        unit_ok = false;
    }
    const std::string rest = unit.substr(1);
    unit_ok = unit_ok && (rest.empty() || rest == "B" || rest == "IB");
  }
  unsigned long long v = 0;
  const std::string digits = t.substr(0, i);
  const bool parsed = unit_ok && parse_unsigned(digits, &v) && v > 0;
  const bool fits = v <= (std::numeric_limits<unsigned long long>::max() >> shift);
  // A size too large for 64 bits is a valid form out of range: say so, not that it is malformed.
  if (unit_ok && all_digits(digits) && digits.find_first_not_of('0') != std::string::npos &&
      !(parsed && fits)) {
    fail<std::invalid_argument>("config", what, "='", text,
                                "' is out of range: a memory size is at most 2^64-1 bytes (16 "
                                "EiB), and no more than this machine can reserve");
  }
  if (!parsed) {
    fail<std::invalid_argument>(
        "config", what, "='", text,
        "' is not a valid memory size: expected a positive number of bytes (1 up to 2^64-1), "
        "optionally with a unit K, M, G or T (binary, e.g. 4GiB or 512MiB)");
  }
  return static_cast<std::size_t>(v << shift);
}

int parse_thread_count(const std::string& text, const char* what) {
  return parse_count(text, what, kMaxDeviceThreads, "thread count");
}

std::int64_t parse_oom_after(const std::string& text, const char* what) {
  constexpr auto kMax = static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max());
  const std::string t = trim(text);
  unsigned long long v = 0;
  const bool parsed = parse_unsigned(t, &v);
  if (!parsed || v > kMax) {
    // Digits that do not fit are out of range; anything else (a sign, letters) is malformed.
    fail<std::invalid_argument>(
        "config", what, "='", text, all_digits(t) ? "' is out of range" : "' is not valid",
        ": expected the number of device allocations that succeed before the injected "
        "out-of-memory error, an integer in 0..",
        kMax);
  }
  return static_cast<std::int64_t>(v);
}

DistFault parse_dist_fault(const std::string& text, const char* what) {
  const auto bad = [&](const std::string& why) {
    fail<std::invalid_argument>("config", what, "='", text, "' is not valid: ", why,
                                "; expected RANK:N:MODE, e.g. 1:3:abort (RANK an integer in 0..",
                                kMaxRank, ", N an integer >= 1, MODE abort or hang)");
  };
  const std::string t = trim(text);
  const std::size_t a = t.find(':');
  const std::size_t b = a == std::string::npos ? a : t.find(':', a + 1);
  if (b == std::string::npos) bad("three parts separated by ':' are needed");
  const std::string rank = trim(t.substr(0, a)), nth = trim(t.substr(a + 1, b - a - 1));
  const std::string mode = trim(t.substr(b + 1));
  unsigned long long r = 0, n = 0;
  if (!parse_unsigned(rank, &r) || r > static_cast<unsigned long long>(kMaxRank)) {
    bad("the rank '" + rank + "' is not an integer in 0.." + std::to_string(kMaxRank));
  }
  constexpr auto kMaxNth =
      static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max());
  if (!parse_unsigned(nth, &n) || n < 1 || n > kMaxNth) {
    bad("N '" + nth + "' is not an integer in 1.." + std::to_string(kMaxNth) +
        " (the rank's N-th collective, counted from 1)");
  }
  DistFaultMode m = DistFaultMode::kAbort;
  if (mode == "hang") {
    m = DistFaultMode::kHang;
  } else if (mode != "abort") {
    bad("the mode '" + mode + "' is neither abort nor hang");
  }
  return {static_cast<int>(r), static_cast<std::int64_t>(n), m};
}

int default_device_threads() noexcept {
  return std::clamp(machine_cpus() - 1, 1, kMaxDeviceThreads);
}

const Config& config() {
  const Loaded& l = loaded();
  if (l.error) throw std::runtime_error(*l.error);
  return l.config;
}

const std::optional<std::string>& config_error() noexcept { return loaded().error; }

bool config_read() noexcept { return g_read.load(std::memory_order_relaxed); }

}  // namespace vdev::rt
