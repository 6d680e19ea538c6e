#include "backend/sanitizer/recorded_stack.h"

#include <torch/csrc/profiler/combined_traceback.h>

#include <atomic>
#include <sstream>
#include <unordered_set>
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

struct HiddenFrames {
  std::mutex mu;
  std::unordered_set<std::string> files;  // guarded by mu
};

HiddenFrames& hidden_frames() {
  static auto* h = new HiddenFrames;  // leaked: stacks may be formatted during teardown
  return *h;
}

std::string format(const SymbolizedStacks& sym, std::size_t i,
                   const std::unordered_set<std::string>& hidden) {
  const std::vector<std::uint64_t>& frames = sym.stacks[i];
  std::ostringstream o;
  auto it = frames.rbegin();
  while (it != frames.rend() && hidden.count(sym.frames[*it].filename) != 0) ++it;
  for (; it != frames.rend(); ++it) {
    const StackFrame& f = sym.frames[*it];
    o << "    File \"" << f.filename << "\", line " << f.line << ", in " << f.name << "\n";
  }
  return o.str();
}

}  // namespace

void hide_outer_frames(std::vector<std::string> filenames) {
  HiddenFrames& h = hidden_frames();
  std::lock_guard<std::mutex> lock(h.mu);
  h.files = std::unordered_set<std::string>(filenames.begin(), filenames.end());
}

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
  std::shared_ptr<c10::GatheredContext> frames;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frames_ == nullptr) return text_;
  }
  symbolize_pending_stacks();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frames_ == nullptr) return text_;
    // Not pending, not symbolized: another thread took this stack's batch and is symbolizing it
    // now (its gather's flush, or its own report). Reading text_ now would give "" (a Python
    // thread's stack reported as "no Python frames"): symbolize this one here as well.
    frames = frames_;
  }
  std::shared_ptr<RecordedStack> self(std::shared_ptr<RecordedStack>(), this);  // not owning
  symbolize_batch({self}, {std::move(frames)});
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
  symbolize_batch(live, std::move(frames));
}

void symbolize_batch(const std::vector<std::shared_ptr<RecordedStack>>& live,
                     std::vector<std::shared_ptr<c10::GatheredContext>> frames) {
  std::vector<const c10::GatheredContext*> contexts;
  contexts.reserve(frames.size());
  for (const auto& f : frames) contexts.push_back(f.get());
  std::vector<std::string> texts(live.size());
  try {
    const SymbolizedStacks sym = symbolize_stacks(contexts);
    std::unordered_set<std::string> hidden;
    {
      HiddenFrames& h = hidden_frames();
      std::lock_guard<std::mutex> lock(h.mu);
      hidden = h.files;
    }
    for (std::size_t i = 0; i < live.size(); ++i) texts[i] = format(sym, i, hidden);
  } catch (const std::exception& e) {
    for (auto& t : texts) t = std::string("    (the stack could not be read: ") + e.what() + ")\n";
  }
  for (std::size_t i = 0; i < live.size(); ++i) {
    std::lock_guard<std::mutex> lock(live[i]->mu_);
    // Two threads may symbolize one stack (RecordedStack::text); both write the same text.
    live[i]->text_ = std::move(texts[i]);
    live[i]->frames_.reset();
  }
  frames.clear();
  // torch defers releasing the code objects of a dropped stack to its next gather (which holds the
  // GIL): one now releases them.
  torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

}  // namespace vdev::backend
