// npfctl argument parsing: every subcommand's options, and usage errors that
// must end with exit code 2 and one "npfctl: error:" line.
#include <gtest/gtest.h>

#include <sstream>

#include "cli.h"
#include "dataplane/stats.h"
#include "cli/exit_codes.h"

namespace npf::cli {
namespace {

struct Parsed {
    std::optional<int> rc;
    Options opt;
    std::string out, err;
};

Parsed parse(std::vector<std::string> args)
{
    args.insert(args.begin(), "npfctl");
    Parsed p;
    std::ostringstream out, err;
    p.rc = parseArgs(args, p.opt, out, err);
    p.out = out.str();
    p.err = err.str();
    return p;
}

TEST(CliArgs, AttachDefaults)
{
    Parsed p = parse({"attach", "veth0"});
    ASSERT_FALSE(p.rc) << p.err;
    EXPECT_EQ(p.opt.cmd, Command::Attach);
    EXPECT_EQ(p.opt.ifname, "veth0");
    EXPECT_EQ(p.opt.mode, "native");
    EXPECT_EQ(p.opt.queues, 0u);
    EXPECT_FALSE(p.opt.force);
}

TEST(CliArgs, AttachAllOptions)
{
    Parsed p = parse({"attach", "eth1", "--mode", "skb", "--queues", "4", "--force"});
    ASSERT_FALSE(p.rc) << p.err;
    EXPECT_EQ(p.opt.cmd, Command::Attach);
    EXPECT_EQ(p.opt.ifname, "eth1");
    EXPECT_EQ(p.opt.mode, "skb");
    EXPECT_EQ(p.opt.queues, 4u);
    EXPECT_TRUE(p.opt.force);
}

TEST(CliArgs, Subcommands)
{
    struct Case {
        std::vector<std::string> args;
        Command cmd;
        std::string ifname;
        bool json;
        double watch;
        std::string port, addr;
    };
    const Case cases[] = {
        {{"detach", "veth0"}, Command::Detach, "veth0", false, 0, "", ""},
        {{"status"}, Command::Status, "", false, 0, "", ""},
        {{"status", "veth0", "--json"}, Command::Status, "veth0", true, 0, "", ""},
        {{"stats", "veth0"}, Command::Stats, "veth0", false, 0, "", ""},
        {{"stats", "veth0", "--json", "--watch", "2.5"}, Command::Stats, "veth0", true, 2.5, "", ""},
        {{"flow", "add", "veth0", "5000"}, Command::FlowAdd, "veth0", false, 0, "5000", ""},
        {{"flow", "add", "veth0", "5000", "--addr", "198.18.0.1"}, Command::FlowAdd, "veth0", false, 0, "5000",
         "198.18.0.1"},
        {{"flow", "del", "veth0", "53", "--addr", "fd00::1"}, Command::FlowDel, "veth0", false, 0, "53", "fd00::1"},
        {{"flow", "list", "veth0", "--json"}, Command::FlowList, "veth0", true, 0, "", ""},
    };
    for (const Case& c : cases) {
        Parsed p = parse(c.args);
        SCOPED_TRACE(c.args.front() + " " + (c.args.size() > 1 ? c.args[1] : ""));
        ASSERT_FALSE(p.rc) << p.err;
        EXPECT_EQ(p.opt.cmd, c.cmd);
        EXPECT_EQ(p.opt.ifname, c.ifname);
        EXPECT_EQ(p.opt.json, c.json);
        EXPECT_DOUBLE_EQ(p.opt.watch, c.watch);
        EXPECT_EQ(p.opt.port, c.port);
        EXPECT_EQ(p.opt.addr, c.addr);
    }
}

TEST(CliArgs, VerbosityIsCounted)
{
    EXPECT_EQ(parse({"status"}).opt.verbose, 0);
    EXPECT_EQ(parse({"-v", "status"}).opt.verbose, 1);
    EXPECT_EQ(parse({"-vv", "status"}).opt.verbose, 2);
    EXPECT_EQ(parse({"-v", "-v", "-v", "status"}).opt.verbose, 3);
    EXPECT_EQ(parse({"status", "-v"}).opt.verbose, 1); // after the subcommand too
}

TEST(CliArgs, UsageErrorsExit2WithOneLine)
{
    const std::vector<std::vector<std::string>> bad = {
        {},
        {"bogus"},
        {"attach"},
        {"attach", "veth0", "--mode", "turbo"},
        {"attach", "veth0", "--queues", "0"},
        {"attach", "veth0", "--queues", "65"},
        {"attach", "veth0", "--queues", "abc"},
        {"attach", "veth0", "--queues", "-1"},
        {"attach", "veth0", "--region-pages", "1024"}, // gone in ABI 3: each engine sizes its own region
        {"attach", "veth0", "extra"},
        {"attach", "veth0", "--no-such-option"},
        {"detach"},
        {"stats"},
        {"stats", "veth0", "--watch", "0"},
        {"stats", "veth0", "--watch", "-1"},
        {"stats", "veth0", "--watch", "soon"},
        {"flow"},
        {"flow", "add", "veth0"},
        {"flow", "frob", "veth0", "1"},
        {"flow", "list"},
    };
    for (const auto& args : bad) {
        Parsed p = parse(args);
        std::string joined;
        for (const auto& a : args)
            joined += a + " ";
        SCOPED_TRACE(joined);
        ASSERT_TRUE(p.rc.has_value());
        EXPECT_EQ(*p.rc, kExitUsage);
        EXPECT_EQ(p.err.rfind("npfctl: error: ", 0), 0u) << p.err;
        EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
        EXPECT_TRUE(p.out.empty());
    }
}

TEST(CliArgs, HelpAndVersionExit0)
{
    Parsed v = parse({"--version"});
    ASSERT_TRUE(v.rc.has_value());
    EXPECT_EQ(*v.rc, kExitOk);
    EXPECT_NE(v.out.find("npfctl"), std::string::npos);
    EXPECT_NE(v.out.find("ABI " + std::to_string(NPF_ABI_VERSION)), std::string::npos);

    Parsed h = parse({"--help"});
    ASSERT_TRUE(h.rc.has_value());
    EXPECT_EQ(*h.rc, kExitOk);
    for (const char* sub : {"attach", "detach", "status", "stats", "flow"})
        EXPECT_NE(h.out.find(sub), std::string::npos) << sub;

    Parsed ha = parse({"attach", "--help"});
    ASSERT_TRUE(ha.rc.has_value());
    EXPECT_EQ(*ha.rc, kExitOk);
    for (const char* opt : {"--mode", "--queues", "--force"})
        EXPECT_NE(ha.out.find(opt), std::string::npos) << opt;

    // stats --help lists the XDP counters with their help lines (NPF_STATS).
    Parsed hs = parse({"stats", "--help"});
    ASSERT_TRUE(hs.rc.has_value());
    for (size_t i = 0; i < std::size(dataplane::kStatNames); i++)
        EXPECT_NE(hs.out.find("  " + std::string(dataplane::kStatNames[i]) + " "), std::string::npos) << dataplane::kStatNames[i];
    for (const char* help : dataplane::kStatHelp)
        EXPECT_NE(hs.out.find(help), std::string::npos) << help;
}

} // namespace
} // namespace npf::cli
