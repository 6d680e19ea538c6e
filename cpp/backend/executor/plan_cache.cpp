#include "backend/executor/plan_cache.h"

#include <ATen/Context.h>

#include <cstring>
#include <mutex>
#include <unordered_map>
#include "runtime/process.h"

namespace vdev::backend {
namespace {

constexpr std::size_t kMaxEntries = 8192;

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const LaunchPlan>> entries;
};

Cache& cache() {
  // Leaked: may be used until exit.
  static Cache* c = vdev::rt::new_leaked_with_fork_lock<Cache>(vdev::rt::ForkLockLevel::kPlanCache);
  return *c;
}

template <typename T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_tensor(std::string& k, const at::Tensor& t) {
  if (!t.defined()) {
    k.push_back('u');
    return;
  }
  put(k, static_cast<int8_t>(t.device().type()));  // vdev, cpu, or another (then declined)
  put(k, static_cast<int8_t>(t.scalar_type()));
  // A wrapped number (a Python scalar) takes part in type promotion below a 0-dim tensor.
  put(k, static_cast<int8_t>((t.is_conj() ? 1 : 0) | (t.is_neg() ? 2 : 0) |
                             (t.unsafeGetTensorImpl()->is_wrapped_number() ? 4 : 0)));
  put(k, static_cast<int32_t>(t.dim()));
  for (int64_t s : t.sizes()) put(k, s);
  for (int64_t s : t.strides()) put(k, s);
}

// Appends an exact encoding of `v`; false if `v` is of a kind this key does not describe.
bool put_value(std::string& k, const c10::IValue& v) {
  if (v.isTensor()) {
    put_tensor(k, v.toTensor());
  } else if (v.isTensorList()) {
    k.push_back('L');
    const auto ts = v.toTensorVector();
    put(k, static_cast<int32_t>(ts.size()));
    for (const auto& t : ts) put_tensor(k, t);
  } else if (v.isOptionalTensorList()) {
    k.push_back('O');
    const auto ts = v.toOptionalTensorList();
    put(k, static_cast<int32_t>(ts.size()));
    for (const auto& t : ts) {
      const std::optional<at::Tensor> o = t;
      if (o) {
        put_tensor(k, *o);
      } else {
        k.push_back('n');
      }
    }
  } else if (v.isNone()) {
    k.push_back('N');
  } else if (v.isBool()) {
    k.push_back(v.toBool() ? 'T' : 'F');
  } else if (v.isInt()) {
    k.push_back('i');
    put(k, v.toInt());
  } else if (v.isDouble()) {
    k.push_back('d');
    put(k, v.toDouble());  // bit for bit
  } else if (v.isComplexDouble()) {
    k.push_back('z');
    const c10::complex<double> z = v.toComplexDouble();
    put(k, z.real());
    put(k, z.imag());
  } else if (v.isIntList()) {
    k.push_back('I');
    const auto xs = v.toIntVector();
    put(k, static_cast<int32_t>(xs.size()));
    for (int64_t x : xs) put(k, x);
  } else if (v.isDoubleList()) {
    k.push_back('D');
    const auto xs = v.toDoubleVector();
    put(k, static_cast<int32_t>(xs.size()));
    for (double x : xs) put(k, x);
  } else if (v.isBoolList()) {
    k.push_back('B');
    const auto xs = v.toBoolList();
    put(k, static_cast<int32_t>(xs.size()));
    for (bool x : xs) k.push_back(x ? '1' : '0');
  } else if (v.isGenerator()) {
    k.push_back('G');  // which generator does not change the plan: the task draws from it
  } else if (v.isString()) {
    k.push_back('s');
    const std::string& s = v.toStringRef();
    put(k, static_cast<int32_t>(s.size()));
    k.append(s);
  } else {
    return false;  // ScalarType, MemoryFormat, Layout, Device, ... arrive as ints or are declined
  }
  return true;
}

}  // namespace

bool plan_cache_key(std::string& k, const c10::FunctionSchema& op, const torch::jit::Stack& stack,
                    std::size_t first, std::size_t n) {
  k.clear();  // keeps its capacity
  k.append(op.name());
  k.push_back('.');
  k.append(op.overload_name());
  k.push_back('\0');
  // Meta functions written for CUDA raise CUDA's nondeterminism alerts in deterministic mode
  // (meta_median_mode_dim for torch.mode): a plan that failed then must not stand for calls made
  // with the mode off.
  k.push_back(at::globalContext().deterministicAlgorithms() ? 'D' : 'N');
  for (std::size_t i = first; i < first + n; ++i) {
    if (!put_value(k, stack[i])) return false;
  }
  return true;
}

std::shared_ptr<const LaunchPlan> plan_cache_find(const std::string& key) {
  std::lock_guard<std::mutex> lock(cache().mu);
  auto it = cache().entries.find(key);
  if (it == cache().entries.end()) return nullptr;
  return it->second;
}

void plan_cache_store(const std::string& key, std::shared_ptr<const LaunchPlan> result) {
  std::lock_guard<std::mutex> lock(cache().mu);
  if (cache().entries.size() >= kMaxEntries) cache().entries.clear();
  cache().entries.emplace(key, std::move(result));
}

}  // namespace vdev::backend
