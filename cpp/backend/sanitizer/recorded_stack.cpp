#include "backend/sanitizer/recorded_stack.h"

#include <torch/csrc/profiler/combined_traceback.h>

#include <atomic>
#include <sstream>
#include <utility>
#include <vector>

#include "backend/memory/memory_history.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

constexpr std::size_t kBatch = 256;
std::atomic<bool> g_release_soon{false};

struct Pending {
  std::mutex mu;
  std::vector<std::weak_ptr<RecordedStack>> stacks;  // guarded by mu
};

Pending& pending() {
  // Leaked (stacks may be released during interpreter teardown); its lock is a fork lock.
  static auto* p =
      vdev::rt::new_leaked_with_fork_lock<Pending>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *p;
}

std::string format(const SymbolizedStacks& sym, std::size_t i) {
  const std::vector<std::uint64_t>& frames = sym.stacks[i];
  std::ostringstream o;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    const StackFrame& f = sym.frames[*it];
    o << "    File \"" << f.filename << "\", line " << f.line << ", in " << f.name << "\n";
  }
  return o.str();
}

}  // namespace

void release_stacks_soon() noexcept { g_release_soon.store(true, std::memory_order_relaxed); }

std::shared_ptr<RecordedStack> RecordedStack::gather() {
  if (g_release_soon.exchange(false, std::memory_order_relaxed)) symbolize_pending_stacks();
  auto frames = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
  if (frames == nullptr) return nullptr;
  auto stack = std::make_shared<RecordedStack>();
  stack->frames_ = std::move(frames);
  bool flush = false;
  {
    Pending& p = pending();
    std::lock_guard<std::mutex> lock(p.mu);
    p.stacks.push_back(stack);
    flush = p.stacks.size() >= kBatch;
  }
  if (flush) symbolize_pending_stacks();
  return stack;
}

std::string RecordedStack::text() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frames_ == nullptr) return text_;
  }
  symbolize_pending_stacks();
  std::lock_guard<std::mutex> lock(mu_);
  return text_;
}

void symbolize_pending_stacks() {
  std::vector<std::weak_ptr<RecordedStack>> batch;
  {
    Pending& p = pending();
    std::lock_guard<std::mutex> lock(p.mu);
    batch.swap(p.stacks);
  }
  std::vector<std::shared_ptr<RecordedStack>> live;
  std::vector<std::shared_ptr<c10::GatheredContext>> frames;
  for (auto& weak : batch) {
    if (auto s = weak.lock()) {
      std::lock_guard<std::mutex> lock(s->mu_);
      if (s->frames_ == nullptr) continue;
      frames.push_back(s->frames_);
      live.push_back(std::move(s));
    }
  }
  if (live.empty()) return;
  std::vector<const c10::GatheredContext*> contexts;
  contexts.reserve(frames.size());
  for (const auto& f : frames) contexts.push_back(f.get());
  std::vector<std::string> texts(live.size());
  try {
    const SymbolizedStacks sym = symbolize_stacks(contexts);
    for (std::size_t i = 0; i < live.size(); ++i) texts[i] = format(sym, i);
  } catch (const std::exception& e) {
    for (auto& t : texts) t = std::string("    (the stack could not be read: ") + e.what() + ")\n";
  }
  for (std::size_t i = 0; i < live.size(); ++i) {
    std::lock_guard<std::mutex> lock(live[i]->mu_);
    live[i]->text_ = std::move(texts[i]);
    live[i]->frames_.reset();
  }
  frames.clear();
  live.clear();
  // torch defers releasing the code objects of a dropped stack to its next gather (which holds the
  // GIL): one now releases them.
  torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

}  // namespace vdev::backend
