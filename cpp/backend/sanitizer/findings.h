// How a sanitizer finding reaches the program: raised at the host call that made it, as
// torch.vdev.sanitizer.StreamRaceError or UninitializedReadError (RuntimeErrors), or, in "warn"
// mode, a warning at that call; either way it is kept for torch.vdev.sanitizer.findings() (the
// summary of python -m torch_vdev.sanitize).
//
// The Python exception types are the bindings' (they link libtorch_python): they install a raiser
// at import. Without it (C++ only) a finding raises c10::Error.
//
// Thread rules: safe from any thread; the kept findings are guarded by a mutex.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backend/common/export.h"

namespace vdev::backend {

enum class FindingKind { kDataRace = 0, kUninitializedRead = 1 };

struct Finding {
  FindingKind kind;
  std::string message;
};

// Throws the Python exception for `kind` with `message`; must throw.
using FindingRaiser = void (*)(FindingKind kind, const std::string& message);
VDEV_BACKEND_API void set_finding_raiser(FindingRaiser raiser);

// While one lives on a thread, findings there are warnings whatever the mode (where raising is
// impossible: host_operators.h).
class ForceFindingWarnings {
 public:
  ForceFindingWarnings();
  ~ForceFindingWarnings();
  ForceFindingWarnings(const ForceFindingWarnings&) = delete;
  ForceFindingWarnings& operator=(const ForceFindingWarnings&) = delete;

 private:
  bool before_;
};

// Keeps the finding, then warns (warn mode) or raises.
void report_finding(FindingKind kind, const std::string& message);

// The findings kept so far (the first kMaxKeptFindings), and how many there were in all.
inline constexpr std::size_t kMaxKeptFindings = 256;
VDEV_BACKEND_API std::vector<Finding> kept_findings();
VDEV_BACKEND_API std::size_t finding_count();
VDEV_BACKEND_API void clear_findings();

}  // namespace vdev::backend
