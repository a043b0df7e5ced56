// The kernel check: which releases can load npf_xdp, and the one line that
// says why not.
#include <gtest/gtest.h>

#include <sys/utsname.h>

#include "dataplane/kernel.h"

namespace npf::dataplane {
namespace {

TEST(Kernel, ReleasesAreReadAsMajorDotMinor)
{
    EXPECT_EQ(parseKernelRelease("6.18.0-1-amd64"), (KernelVersion{6, 18}));
    EXPECT_EQ(parseKernelRelease("5.18"), (KernelVersion{5, 18}));
    EXPECT_EQ(parseKernelRelease("4.19.0-27-cloud-amd64"), (KernelVersion{4, 19}));
    EXPECT_EQ(parseKernelRelease("10.2-rc1"), (KernelVersion{10, 2}));
    for (const char* bad : {"", "6", "6.", ".18", "x6.18", "6-18", "6.x"})
        EXPECT_FALSE(parseKernelRelease(bad)) << "'" << bad << "'";
}

TEST(Kernel, TooOldAKernelIsOneClearLine)
{
    EXPECT_EQ(kernelProblem("5.18.0"), "");
    EXPECT_EQ(kernelProblem("6.1.0-27-amd64"), "") << "6.1 loads it; jumbo and the page pool are probed where used";
    const std::string old = kernelProblem("5.15.0-91-generic");
    EXPECT_NE(old.find("kernel 5.15.0-91-generic is too old"), std::string::npos) << old;
    for (const char* need : {"5.18", "6.6", "6.8"})
        EXPECT_NE(old.find(need), std::string::npos) << need << ": " << old;
    EXPECT_EQ(old.find('\n'), std::string::npos) << old;
    EXPECT_NE(kernelProblem("4.9").find("too old"), std::string::npos);
    EXPECT_NE(kernelProblem("weird").find("not a version"), std::string::npos);
}

TEST(Kernel, ThisMachinesKernelPasses)
{
    utsname u{};
    ASSERT_EQ(::uname(&u), 0);
    EXPECT_EQ(kernelProblem(u.release), "") << "the tests need a kernel that loads npf_xdp";
    EXPECT_NO_THROW(requireKernel());
}

} // namespace
} // namespace npf::dataplane
