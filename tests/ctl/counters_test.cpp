// The counter tables of include/npf/counters.h.
#include <gtest/gtest.h>

TEST(Counters, Placeholder) {}
