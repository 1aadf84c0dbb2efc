#pragma once
// FUZZ_CHECK: an invariant of a fuzz target. A failure prints what broke and aborts, which
// libFuzzer reports as a crash and saves the input (crash-<sha1>) for a regression test.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)
