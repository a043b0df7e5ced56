// What the command-line layer makes of what a user types and of what failed:
// modes, and the exit code of each error class.
#include <gtest/gtest.h>

#include <stdexcept>
#include <system_error>

#include "cli/args.h"
#include "cli/exit_codes.h"
#include "sys/error.h"

namespace npf::cli {
namespace {

using dataplane::AttachMode;

TEST(Mode, Parse)
{
    EXPECT_EQ(parseMode("native"), AttachMode::Native);
    EXPECT_EQ(parseMode("drv"), AttachMode::Native);
    EXPECT_EQ(parseMode("skb"), AttachMode::Skb);
    EXPECT_EQ(parseMode("generic"), AttachMode::Skb);
    EXPECT_FALSE(parseMode("hw"));
    EXPECT_FALSE(parseMode(""));
    EXPECT_FALSE(parseMode("Native"));
}

TEST(ExitCodes, PerErrorClass)
{
    EXPECT_EQ(exitCodeFor(ArgumentError("bad")), kExitUsage);
    EXPECT_EQ(exitCodeFor(StateError(EBUSY, "already attached")), kExitConflict);
    EXPECT_EQ(exitCodeFor(StateError(ENOENT, "not attached")), kExitConflict);
    EXPECT_EQ(exitCodeFor(Error(EPERM, "needs root")), kExitPermission);
    EXPECT_EQ(exitCodeFor(std::system_error(EACCES, std::generic_category(), "open pin")), kExitPermission);
    EXPECT_EQ(exitCodeFor(Error(ENODEV, "no interface")), kExitNoDevice);
    EXPECT_EQ(exitCodeFor(std::system_error(EOPNOTSUPP, std::generic_category(), "mode")), kExitFailure);
    EXPECT_EQ(exitCodeFor(std::runtime_error("x")), kExitFailure);
}

TEST(Errors, MessagesAreVerbatim)
{
    EXPECT_STREQ(StateError(EEXIST, "veth0 already has a foreign XDP program").what(),
                 "veth0 already has a foreign XDP program");
    EXPECT_EQ(StateError(EEXIST, "x").code().value(), EEXIST);
    EXPECT_EQ(ArgumentError("x").code().value(), EINVAL);
}

} // namespace
} // namespace npf::cli
