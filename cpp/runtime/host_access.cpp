#include "runtime/host_access.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

namespace vdev::rt {
namespace {

struct sigaction g_previous_segv;
struct sigaction g_previous_bus;
DeviceAddressLookup g_lookup{};  // set once, before the handler is installed

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

// Hands the signal to whoever was there before, as the kernel would have delivered it:
// - a handler is called with its own mask added to the blocked set (and the signal itself
//   unblocked if it asked for SA_NODEFER); SA_RESETHAND makes it a one-shot, as for the kernel.
//   This handler stays installed: a previous handler that recovers from the fault (a JIT's
//   guard pages, say) keeps working, and later faults are still diagnosed.
// - the default action (or SIG_IGN, which the kernel does not honour for a synchronous fault):
//   restored for the signal, then return, so that the faulting instruction runs again and the
//   kernel ends the process with the right status and core dump. Nothing else runs after that.
// Only async-signal-safe calls: sigaction, pthread_sigmask.
void hand_on(int sig, siginfo_t* info, void* context) {
  struct sigaction& prev = sig == SIGBUS ? g_previous_bus : g_previous_segv;
  const bool has_action =
      (prev.sa_flags & SA_SIGINFO) != 0
          ? prev.sa_sigaction != nullptr
          : prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr;
  if (!has_action) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    return;
  }
  sigset_t mask = prev.sa_mask;
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &mask, &old);
  if ((prev.sa_flags & SA_NODEFER) != 0) {
    sigset_t self;
    sigemptyset(&self);
    sigaddset(&self, sig);
    pthread_sigmask(SIG_UNBLOCK, &self, nullptr);
  }
  const struct sigaction called = prev;
  if ((prev.sa_flags & SA_RESETHAND) != 0) {  // one-shot: later faults get the default action
    prev.sa_flags = 0;
    prev.sa_handler = SIG_DFL;
  }
  if ((called.sa_flags & SA_SIGINFO) != 0) {
    called.sa_sigaction(sig, info, context);
  } else {
    called.sa_handler(sig);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const int device = g_lookup.device_of(addr);
  if (device >= 0) {
    put("\nvdev: the host touched device memory at ");
    put_hex(addr);
    put(" on vdev:");
    put_dec(static_cast<std::uintptr_t>(device));
    std::uintptr_t start = 0;
    std::size_t size = 0;
    if (g_lookup.find_allocation(addr, &start, &size)) {
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
  }
  hand_on(sig, info, context);
}

}  // namespace

void install_host_access_diagnostics(DeviceAddressLookup lookup) noexcept {
  static std::once_flag once;
  std::call_once(once, [&] {
    g_lookup = lookup;  // before the handler can run
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = &on_fault;
    // No SA_NODEFER: a fault inside this handler must not re-enter it (the kernel then ends the
    // process).
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
  });
}

}  // namespace vdev::rt
