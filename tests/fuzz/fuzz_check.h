// A failed property in a fuzz target: print it and abort, so libFuzzer
// reports the input as a crash and saves it.
#pragma once

#include <cstdio>
#include <cstdlib>

#define NPF_FUZZ_CHECK(cond, ...)                                                   \
    do {                                                                            \
        if (!(cond)) {                                                              \
            std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                      \
            std::fprintf(stderr, "\n");                                             \
            std::abort();                                                           \
        }                                                                           \
    } while (0)
