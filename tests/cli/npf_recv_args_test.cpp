// npf-recv (the real binary) with bad arguments: exit code 2 and one
// "npf-recv: error:" line that names the option, before any interface is
// touched (the interface given does not exist: reaching it would exit 4).
#include <gtest/gtest.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "cli/exit_codes.h"
#include "dataplane/pins.h"
#include "netns.h"

namespace npf::cli {
namespace {

constexpr const char* kNoSuchIface = "npfnosuch0";

struct RecvRun {
    int status = -1;
    std::string err;
};

// npf-recv ARGS with a deadline; stderr only.
RecvRun npfRecv(const std::string& args)
{
    RecvRun r;
    r.err = test::shOut("timeout 10 " NPF_RECV_PATH " " + args + " 2>&1 >/dev/null", &r.status);
    return r;
}

TEST(NpfRecvArgs, BadArgumentsExit2NamingTheOption)
{
    const std::string iface = std::string(kNoSuchIface) + " 5000 ";
    const std::pair<std::string, const char*> cases[] = {
        {iface + "--region 17179869185G", "--region: '17179869185G' is too large"},
        {iface + "--region 99999999999999999999", "--region: '99999999999999999999' is too large"},
        {iface + "--region -5", "--region: '-5' is not a size"},
        {iface + "--region ''", "--region: '' is not a size"},
        {iface + "--region 64X", "--region: '64X' is not a size"},
        {iface + "--region 0", "--region: '0' is out of range"},
        {iface + "--region 2T", "--region: '2T' is out of range"},
        {iface + "--region 18446744073709551615", "--region: '18446744073709551615' is out of range"},
        {iface + "--budget 17592186044417M", "--budget: '17592186044417M' is too large"},
        {iface + "--budget -1", "--budget: '-1' is not a size"},
        {iface + "--buf-size 0", "--buf-size: '0' is out of range"},
        {iface + "--buf-size -5", "--buf-size: '-5' is not a size"},
        {iface + "--buf-size 128M", "--buf-size: '128M' is out of range"},
        {iface + "--buf-size 5G --region 8G", "--buf-size: '5G' is out of range"},
        {iface + "--idle -1", "--idle: '-1'"},
        {iface + "--idle nan", "--idle: 'nan'"},
        {iface + "--reorder-ms 0", "--reorder-ms: '0'"},
        {iface + "--reorder-ms -1", "--reorder-ms: '-1'"},
        {iface + "--reorder-ms inf", "--reorder-ms: 'inf'"},
        {iface + "--count -1", "--count: '-1'"},
        {iface + "--queues 65", "--queues"},
        {iface + "--prefetch -1", "--prefetch"},
        {iface + "--pagers 0", "--pagers"},
        {iface + "--pagers 65", "--pagers"},
        {iface + "--mode turbo", "--mode"},
        {iface + "--addr 1.2.3", "--addr: invalid address '1.2.3'"},
        {iface + "--addr 0.0.0.0", "--addr: address '0.0.0.0' is unspecified"},
        {iface + "--no-such-option", "--no-such-option"},
        {std::string(kNoSuchIface) + " 0", "port"},
        {std::string(kNoSuchIface) + " 65536", "port"},
        {"", "interface is required"},
    };
    for (const auto& [args, named] : cases) {
        SCOPED_TRACE(args);
        RecvRun r = npfRecv(args);
        EXPECT_EQ(r.status, kExitUsage) << r.err;
        EXPECT_EQ(r.err.rfind("npf-recv: error: ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

TEST(NpfRecvArgs, HelpExits0)
{
    int status = -1;
    std::string out = test::shOut(NPF_RECV_PATH " --help", &status);
    EXPECT_EQ(status, kExitOk);
    EXPECT_NE(out.find("--region SIZE"), std::string::npos) << out;
}

// --ready-fd names a descriptor npf-recv inherits: one that is not open is a
// usage error, found before anything is attached (the interface does not
// exist: reaching it would exit 4, or 3 without root). The shell closes the
// number for npf-recv alone, whatever the test process has open.
TEST(NpfRecvArgs, ReadyFdNotOpenExits2)
{
    for (const char* fd : {"9", "5"}) { // one digit: sh redirects no higher number
        SCOPED_TRACE(fd);
        RecvRun r = npfRecv(std::string(kNoSuchIface) + " 5000 --ready-fd " + fd + " " + fd + ">&-");
        EXPECT_EQ(r.status, kExitUsage) << r.err;
        EXPECT_EQ(r.err, "npf-recv: error: --ready-fd: " + std::string(fd) + " is not an open file descriptor\n");
    }
    RecvRun r = npfRecv(std::string(kNoSuchIface) + " 5000 --ready-fd -1");
    EXPECT_EQ(r.status, kExitUsage) << r.err;
    EXPECT_EQ(r.err.rfind("npf-recv: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("--ready-fd"), std::string::npos) << r.err;
}

// Run to completion, a reserve and busy-polling pagers are a data path of
// npf-recv's own: in brokered mode npfd runs it, so asking for them there is
// a usage error, said before anything connects (in mode auto: once npfd
// said which mode it grants).
TEST(NpfRecvArgs, RunToCompletionThroughNpfdBrokeredExits2)
{
    RecvRun r = npfRecv(std::string(kNoSuchIface) +
                        " 5000 --connect /nonexistent/npfd.sock --client-mode brokered --run-to-completion");
    EXPECT_EQ(r.status, kExitUsage) << r.err;
    EXPECT_EQ(r.err, "npf-recv: error: --run-to-completion: npfd runs this client's data path (brokered mode): the "
                     "fast path is npfd's workers'\n");
}

TEST(NpfRecvArgs, ReserveThroughNpfdBrokeredExits2)
{
    RecvRun r =
        npfRecv(std::string(kNoSuchIface) + " 5000 --connect /nonexistent/npfd.sock --client-mode brokered --reserve 1M");
    EXPECT_EQ(r.status, kExitUsage) << r.err;
    EXPECT_EQ(r.err, "npf-recv: error: --reserve: npfd runs this client's data path (brokered mode): the region's "
                     "pages are the client's memfd\n");
}

TEST(NpfRecvArgs, PagerBusyPollThroughNpfdBrokeredExits2)
{
    RecvRun r = npfRecv(std::string(kNoSuchIface) +
                        " 5000 --connect /nonexistent/npfd.sock --client-mode brokered --pager-busy-poll");
    EXPECT_EQ(r.status, kExitUsage) << r.err;
    EXPECT_EQ(r.err, "npf-recv: error: --pager-busy-poll: npfd runs this client's data path (brokered mode): the "
                     "pagers are npfd's (npfd --pager-busy-poll)\n");
}

// --client-mode is --connect's, and one of three words.
TEST(NpfRecvArgs, ClientModeWithoutConnectOrUnknownExits2)
{
    RecvRun r = npfRecv(std::string(kNoSuchIface) + " 5000 --client-mode delegated");
    EXPECT_EQ(r.status, kExitUsage) << r.err;
    EXPECT_EQ(r.err, "npf-recv: error: --client-mode: only with --connect\n");
    r = npfRecv(std::string(kNoSuchIface) + " 5000 --connect /nonexistent/npfd.sock --client-mode sideways");
    EXPECT_EQ(r.status, kExitUsage) << r.err;
    EXPECT_NE(r.err.find("--client-mode"), std::string::npos) << r.err;
}

// Everything npf-recv does before it looks the interface up creates nothing,
// as long as bpffs is mounted already (else it would mount it).
TEST(NpfRecvArgs, MissingInterfaceExits4)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root (without it npf-recv exits 3 before the interface lookup)";
    if (!dataplane::isBpffs(dataplane::kBpffsPath))
        GTEST_SKIP() << "bpffs is not mounted at " << dataplane::kBpffsPath << " (npf-recv would mount it)";
    if (if_nametoindex(kNoSuchIface) != 0)
        GTEST_SKIP() << kNoSuchIface << " exists";
    RecvRun r = npfRecv(std::string(kNoSuchIface) + " 5000 -q");
    EXPECT_EQ(r.status, kExitNoDevice) << r.err;
    EXPECT_NE(r.err.find("no interface '" + std::string(kNoSuchIface) + "'"), std::string::npos) << r.err;
}

} // namespace
} // namespace npf::cli
