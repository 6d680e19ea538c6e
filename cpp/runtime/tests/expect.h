// The checks of the standalone C++ test binaries (no test framework): EXPECT counts a failed
// condition (from any thread) and prints where it failed; report() prints the verdict line and
// returns the exit code CTest judges the test by.
#pragma once

#include <atomic>
#include <cstdio>

inline std::atomic<int> g_failures{0};

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
    }                                                                        \
  } while (0)

inline int report() {
  const int n = g_failures.load();
  std::printf("%s: %d failure(s)\n", n ? "FAILED" : "OK", n);
  return n ? 1 : 0;
}
