#include "backend/sanitizer/findings_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/common/json_text.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

struct FileState {
  std::mutex mu;  // a fork lock: a child forked while another thread appends does not inherit it
                  // locked
  pid_t pid = 0;  // guarded by mu: the process the count belongs to (fork resets it)
  std::size_t written = 0;  // guarded by mu
};

FileState& file_state() {
  // Leaked: findings may be reported during interpreter teardown.
  static FileState* s =
      vdev::rt::new_leaked_with_fork_lock<FileState>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *s;
}

// The folder, read once: the CLI sets it before the script starts, and reading the environment at
// every report could race with a Python thread's os.environ change (setenv).
const std::string& findings_dir() {
  static const std::string dir = [] {
    const char* d = std::getenv("VDEV_SANITIZER_FINDINGS_DIR");
    return std::string(d == nullptr ? "" : d);
  }();
  return dir;
}

}  // namespace

void append_finding_to_file(int kind, const std::string& message, std::size_t max_messages) {
  const std::string& dir = findings_dir();
  if (dir.empty()) return;
  try {
    FileState& st = file_state();
    std::lock_guard<std::mutex> lock(st.mu);
    const pid_t pid = ::getpid();
    if (st.pid != pid) {  // a forked child starts its own file and count
      st.pid = pid;
      st.written = 0;
    }
    std::string line = "{\"kind\": " + std::to_string(kind);
    if (st.written < max_messages) line += ", \"message\": " + json_string(message);
    line += "}\n";
    const std::string path =
        dir + "/findings-" + std::to_string(static_cast<long long>(pid)) + ".jsonl";
    if (std::FILE* f = std::fopen(path.c_str(), "a")) {
      std::fwrite(line.data(), 1, line.size(), f);
      std::fclose(f);
      ++st.written;
    }
  } catch (...) {  // out of memory: the report itself goes on
  }
}

}  // namespace vdev::backend
