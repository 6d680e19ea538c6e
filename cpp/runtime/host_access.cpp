#include "runtime/host_access.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "runtime/arena.h"

namespace vdev::rt {
namespace {

struct sigaction g_previous_segv;
struct sigaction g_previous_bus;

// Async-signal-safe output: no stdio, no allocation.
void put(const char* s) {
  const std::size_t n = std::strlen(s);
  ssize_t ignored = write(STDERR_FILENO, s, n);
  (void)ignored;
}

void put_hex(std::uintptr_t v) {
  char buf[2 + 16 + 1];
  char* p = buf + sizeof buf - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  put(p);
}

void put_dec(std::uintptr_t v) {
  char buf[24];
  char* p = buf + sizeof buf - 1;
  *p = '\0';
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  put(p);
}

// Hands the signal to whoever was there before: restores that action and returns, so that the
// faulting instruction runs again and faults into it (or into the default action).
void hand_on(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = sig == SIGBUS ? g_previous_bus : g_previous_segv;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  sigaction(sig, &prev, nullptr);  // default action on the re-executed fault
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const int device = arena::device_of(addr);
  if (device >= 0) {
    put("\nvdev: the host touched device memory at ");
    put_hex(addr);
    put(" on vdev:");
    put_dec(static_cast<std::uintptr_t>(device));
    std::uintptr_t start = 0;
    std::size_t size = 0;
    if (try_find_allocation(addr, &start, &size)) {
      put(", inside the device allocation ");
      put_hex(start);
      put(" of ");
      put_dec(size);
      put(" bytes (offset ");
      put_dec(addr - start);
      put(")");
    } else {
      put(", outside any live device allocation");
    }
    put(".\nvdev: device memory is not host-accessible: a data_ptr() of a vdev tensor is a device "
        "address. Copy the tensor to the CPU first (tensor.cpu()).\n");
    // From here on this fault is fatal: the previous handler or the default action ends it.
    sigaction(sig, sig == SIGBUS ? &g_previous_bus : &g_previous_segv, nullptr);
    return;
  }
  hand_on(sig, info, context);
}

}  // namespace

void install_host_access_diagnostics() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
  });
}

}  // namespace vdev::rt
