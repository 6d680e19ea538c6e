// Injected collective faults (VDEV_DIST_FAULT=RANK:N:MODE, runtime/config.h), so that elastic and
// fault-tolerant training paths (timeouts, torchrun restarts, a new group after a failure) can be
// tested on one machine.
//
// On the process of global rank RANK, the N-th collective it queues (counted from 1 over all its
// vccl groups; a send, a recv and a coalesced batch count as one each; calls refused at the call
// do not count, nor does the device check of a group's first collective) fails when its task
// starts on the group's comm stream, after the collectives queued before it:
//   abort  the process exits at once with status kDistFaultExitCode, printing one line to stderr
//          and running no exit handler, as a crashed rank: the peers' collective fails.
//   hang   the collective never arrives: its task joins no peer and waits out the group's
//          timeout (less if the group is shut down or aborted, or the process exits), then fails
//          as a timed-out collective (DistBackendError; the group is broken, as after any
//          failure). Meanwhile the peers' collective times out with Gloo's error.
// The fault fires once per process, and only in a first attempt (TORCHELASTIC_RESTART_COUNT
// unset or 0), so that a job torchrun restarts can run through.
//
// Thread rules: arm_dist_fault runs as groups are made (torch.distributed's creator, GIL held);
// take_dist_fault from any thread queueing a collective; the fault is written before the fault
// point is armed and never again.
#pragma once

#include <atomic>
#include <chrono>

#include "backend/common/export.h"

namespace vdev::backend {

// The exit status of a rank that VDEV_DIST_FAULT aborts (a shell's status for an aborted process).
inline constexpr int kDistFaultExitCode = 134;

// Called as each vccl group is made, with this process's global rank and the world's size: the
// first call arms the collective fault point (runtime/fault_injection.h, Fault::kCollective) if
// VDEV_DIST_FAULT names this rank and this is a first attempt; later calls do nothing. Raises
// ValueError if the variable names a rank the world does not have, RuntimeError if the
// configuration is malformed.
VDEV_BACKEND_API void arm_dist_fault(int global_rank, int world_size);

// Whether the collective being queued is the faulted one (each call counts one collective).
bool take_dist_fault() noexcept;

// Runs on the comm stream instead of the faulted collective `name`: exits the process (abort), or
// throws DistBackendError once `timeout` has passed or `closed` (the group shut down or aborted)
// or the process is exiting (hang).
[[noreturn]] void act_on_dist_fault(std::chrono::milliseconds timeout,
                                    const std::atomic<bool>& closed, const char* name);

}  // namespace vdev::backend
