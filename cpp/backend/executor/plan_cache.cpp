#include "backend/executor/plan_cache.h"

#include <ATen/Context.h>
#include <c10/core/DefaultDtype.h>

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

}  // namespace

void append_tensor_key(std::string& k, const at::Tensor& t) {
  if (!t.defined()) {
    k.push_back('u');
    return;
  }
  // One resize and plain stores: this runs for every tensor of every queued call.
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  const std::size_t dims = sizes.size();
  const std::size_t at = k.size();
  k.resize(at + 3 + sizeof(int32_t) + 2 * dims * sizeof(int64_t));
  char* p = k.data() + at;
  p[0] = static_cast<char>(t.device().type());  // vdev, cpu, or another (then declined)
  p[1] = static_cast<char>(t.scalar_type());
  // A wrapped number (a Python scalar) takes part in type promotion below a 0-dim tensor.
  p[2] = static_cast<char>((t.is_conj() ? 1 : 0) | (t.is_neg() ? 2 : 0) |
                           (t.unsafeGetTensorImpl()->is_wrapped_number() ? 4 : 0));
  const auto dim = static_cast<int32_t>(dims);
  std::memcpy(p + 3, &dim, sizeof(dim));
  std::memcpy(p + 3 + sizeof(dim), sizes.data(), dims * sizeof(int64_t));
  std::memcpy(p + 3 + sizeof(dim) + dims * sizeof(int64_t), strides.data(), dims * sizeof(int64_t));
}

// An exact encoding of `v`; false if `v` is of a kind this key does not describe.
bool append_value_key(std::string& k, const c10::IValue& v) {
  if (v.isTensor()) {
    append_tensor_key(k, v.toTensor());
  } else if (v.isTensorList()) {
    k.push_back('L');
    const auto ts = v.toTensorVector();
    put(k, static_cast<int32_t>(ts.size()));
    for (const auto& t : ts) append_tensor_key(k, t);
  } else if (v.isOptionalTensorList()) {
    k.push_back('O');
    const auto ts = v.toOptionalTensorList();
    put(k, static_cast<int32_t>(ts.size()));
    for (const auto& t : ts) {
      const std::optional<at::Tensor> o = t;
      if (o) {
        append_tensor_key(k, *o);
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

void append_modes_key(std::string& k) {
  // Meta functions written for CUDA raise CUDA's nondeterminism alerts in deterministic mode
  // (meta_median_mode_dim for torch.mode): a plan that failed then must not stand for calls made
  // with the mode off.
  k.push_back(at::globalContext().deterministicAlgorithms() ? 'D' : 'N');
  // A Python number is a double tensor whatever the default dtype, but `int_tensor / 2` and
  // `int_tensor + 1.5` return the default dtype: a plan made under float64 must not stand for
  // calls made under float32.
  k.push_back(static_cast<char>(c10::typeMetaToScalarType(c10::get_default_dtype())));
}

bool plan_cache_key(std::string& k, const c10::FunctionSchema& op, const torch::jit::Stack& stack,
                    std::size_t first, std::size_t n) {
  k.clear();  // keeps its capacity
  k.append(op.name());
  k.push_back('.');
  k.append(op.overload_name());
  k.push_back('\0');
  append_modes_key(k);
  for (std::size_t i = first; i < first + n; ++i) {
    if (!append_value_key(k, stack[i])) return false;
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

std::shared_ptr<const LaunchPlan> find_or_make_plan(const c10::OperatorHandle& op,
                                                    const torch::jit::Stack& stack,
                                                    std::size_t first, std::size_t nargs) {
  thread_local std::string key;  // reused: no allocation per call
  const bool keyed = plan_cache_key(key, op.schema(), stack, first, nargs);
  if (keyed) {
    if (auto plan = plan_cache_find(key)) return plan;
  }
  std::string miss_key = keyed ? key : std::string();  // the meta call may reenter
  auto plan = make_launch_plan(op, stack, first, nargs);
  if (keyed) plan_cache_store(miss_key, plan);
  return plan;
}

}  // namespace vdev::backend
