// npf_xdp with another XDP program chained behind it (npfctl attach --then
// PATH, --then-existing): a flow's datagrams reach npf-recv byte for byte and
// never the chained program; everything else npf passes goes through the
// chained program (which counts it) to the kernel stack; a program taken over
// from the interface gets its place back at detach and keeps counting; and
// the frags rule (a program array takes one kind only) at MTU 9000.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "chain_count.skel.h"
#include "dataplane/chain.h"
#include "engine_fixture.h"
#include "sys/fd.h"

namespace npf::e2e {
namespace {

namespace fs = std::filesystem;

constexpr uint16_t kFlowPort = 7400;  // npf-recv's flow
constexpr uint16_t kOtherPort = 7401; // not a flow: the kernel's

uint32_t sizeVaried(uint32_t k) { return 1472 - (k * 37) % 600; }
uint32_t sizeSmall(uint32_t k) { return 100 + k % 50; }
uint32_t sizeJumbo(uint32_t k) { return 8972 - (k * 101) % 3000; }

// The counting program (chain_count.bpf.c), loaded by the test and pinned in
// bpffs where npfctl attach --then finds it; unpinned at the end (what npf
// or the interface still holds of it goes with them).
class Counter {
public:
    explicit Counter(bool frags)
    {
        skel_.reset(chain_count__open_and_load());
        if (!skel_)
            throw std::system_error(errno, std::generic_category(), "load chain_count.bpf.c");
        prog_ = frags ? skel_->progs.count_frags : skel_->progs.count_plain;
        dir_ = "/sys/fs/bpf/npf-test-chain-" + std::to_string(getpid()) + "-" + std::to_string(serial_++);
        fs::create_directories(dir_);
        if (bpf_obj_pin(bpf_program__fd(prog_), pin().c_str()) != 0)
            throw std::system_error(errno, std::generic_category(), "pin chain_count at " + pin());
    }
    ~Counter()
    {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    Counter(const Counter&) = delete;
    Counter& operator=(const Counter&) = delete;

    std::string pin() const { return dir_ + "/prog"; }
    int fd() const { return bpf_program__fd(prog_); }
    std::string name() const { return bpf_program__name(prog_); }
    uint32_t id() const
    {
        bpf_prog_info info{};
        uint32_t len = sizeof(info);
        return bpf_obj_get_info_by_fd(fd(), &info, &len) == 0 ? info.id : 0;
    }
    // Packets either of its programs saw.
    uint64_t seen() const
    {
        const uint32_t key = 0;
        uint64_t n = 0;
        bpf_map_lookup_elem(bpf_map__fd(skel_->maps.count_seen), &key, &n);
        return n;
    }

private:
    struct Destroy {
        void operator()(chain_count* s) const noexcept { chain_count__destroy(s); }
    };
    std::unique_ptr<chain_count, Destroy> skel_;
    bpf_program* prog_ = nullptr;
    std::string dir_;
    static inline int serial_ = 0;
};

// npfctl in the rx namespace: stdout and stderr together.
std::string npfctl(Rig& rig, const std::string& args, int* status)
{
    return test::shOut(rig.veth().rxNs().exec() + NPFCTL_PATH + " " + args + " 2>&1", status);
}

// The id of the XDP program attached to the rx interface (0: none).
uint32_t linkProg(Rig& rig)
{
    const std::string out = test::shOut(rig.veth().rxNs().exec() + "ip -j link show dev " + rig.rxIf());
    const nlohmann::json l = nlohmann::json::parse(out).at(0);
    return l.contains("xdp") && l["xdp"].contains("prog") ? l["xdp"]["prog"]["id"].get<uint32_t>() : 0;
}

nlohmann::json status(Rig& rig) { return nlohmann::json::parse(rig.statusJson()); }

// Attaches the program `fd` to the rx interface natively, as a CNI would have
// before npf came.
void attachNative(Rig& rig, int fd)
{
    test::NetnsGuard in(rig.veth().rxNs());
    const int ifindex = static_cast<int>(if_nametoindex(rig.rxIf().c_str()));
    ASSERT_GT(ifindex, 0);
    ASSERT_EQ(bpf_xdp_attach(ifindex, fd, XDP_FLAGS_DRV_MODE, nullptr), 0);
}

// The kind of npf_xdp as attached (its pin): what it takes into npf_next.
dataplane::XdpKind npfKind(Rig& rig)
{
    const std::string path = rig.pinDir() + "/" NPF_PROG_NAME;
    const Fd fd(bpf_obj_get(path.c_str()));
    if (!fd)
        throw std::system_error(errno, std::generic_category(), "open " + path);
    return dataplane::xdpKind(fd.get(), path);
}

class XdpChain : public EngineE2E {
protected:
    // npf-recv receives n datagrams of size(k) bytes on kFlowPort, byte for byte.
    void receiveFlow(Rig& rig, uint32_t n, uint32_t (*size)(uint32_t), const char* bufSize = "2048")
    {
        const std::string tag = std::to_string(run_++);
        const std::string out = dir_.path + "/out" + tag, err = dir_.path + "/err" + tag;
        Child recv(rig.veth().rxNs().path(),
                   {NPF_RECV_PATH, rig.rxIf(), std::to_string(kFlowPort), "-o", out, "-n", std::to_string(n),
                    "--buf-size", bufSize},
                   err, true);
        ASSERT_TRUE(recv.ready());
        ASSERT_EQ(sendDatagrams(rig.veth(), {.count = n, .dstPort = kFlowPort, .size = size, .window = 128,
                                             .done = datagramsWritten(out, 0, size)}),
                  "");
        int st = -1;
        ASSERT_TRUE(recv.wait(int(test::kDeadline.count()), &st)) << readFile(err);
        EXPECT_EQ(st, 0) << readFile(err);
        EXPECT_TRUE(readFile(out) == streamBytes(0, 0, n, size)) << "npf-recv's output is not the stream sent";
    }

    // n datagrams of size(k) bytes to `port`, which `kernel` (bound to it)
    // receives whole, and the counter sees: it stands at seen0 + n.
    void throughTheChain(Rig& rig, KernelSocket& kernel, uint16_t port, uint32_t n, uint32_t (*size)(uint32_t),
                         const Counter& count, uint64_t seen0)
    {
        ASSERT_EQ(sendDatagrams(rig.veth(), {.count = n, .dstPort = port, .size = size}), "");
        std::vector<std::string> got;
        kernel.receive(&got, n, int(test::kDeadline.count()), 0);
        ASSERT_EQ(got.size(), n) << "the kernel socket on port " << port << " got " << got.size() << " of " << n;
        for (uint32_t k = 0; k < n; k++) {
            const std::vector<uint8_t> want = payloadFor(k, size(k));
            EXPECT_TRUE(got[k] == std::string(want.begin(), want.end())) << "datagram " << k << " changed";
        }
        EXPECT_TRUE(test::waitUntil([&] { return count.seen() >= seen0 + n; }));
        EXPECT_EQ(count.seen(), seen0 + n) << "the chained program saw other packets than the test sent";
    }

    void ping(Rig& rig, int n)
    {
        const std::string cmd = rig.veth().txNs().exec() + "ping -c " + std::to_string(n) + " -i 0.2 -W 10 " +
                                rig.rxAddr() + " >/dev/null";
        ASSERT_EQ(test::sh(cmd), 0) << "ping through the chain failed";
    }

    TempDir dir_;
    int run_ = 0;
};

// Parameter: the attach mode.
class XdpChainModes : public XdpChain, public ::testing::WithParamInterface<std::string> {};

// npf first: the flow's datagrams go to npf-recv and never reach the chained
// program; other UDP, ICMP, and the flow's own datagrams once nothing
// serves it (fail open) go through the chained program to the kernel.
TEST_P(XdpChainModes, FlowToNpfEverythingElseThroughTheChainedProgram)
{
    Rig rig;
    Counter count(/*frags=*/false);
    KernelSocket other(rig, kOtherPort), flowPort(rig, kFlowPort);

    int st = -1;
    const std::string a = npfctl(rig, "attach " + rig.rxIf() + " --mode " + GetParam() + " --then " + count.pin(), &st);
    ASSERT_EQ(st, 0) << a;
    EXPECT_NE(a.find("chained '" + count.name() + "' (prog id " + std::to_string(count.id()) + ")"),
              std::string::npos) << a;
    const nlohmann::json s = status(rig);
    ASSERT_TRUE(s["next_program"].is_object()) << s.dump();
    EXPECT_EQ(s["next_program"]["id"], count.id());
    EXPECT_EQ(s["next_program"]["name"], count.name());
    EXPECT_EQ(linkProg(rig), s["prog_id"].get<uint32_t>()) << "npf_xdp is not the program on the interface";
    EXPECT_FALSE(npfKind(rig).frags) << "npf_xdp is frags-aware: a program array of it refuses count_plain";

    const Counters xdp0 = rig.xdp();
    const uint32_t n = 300;
    ASSERT_NO_FATAL_FAILURE(receiveFlow(rig, n, sizeVaried));
    EXPECT_EQ(count.seen(), 0u) << "flow datagrams reached the chained program";

    const uint32_t m = 50, pings = 3;
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, m, sizeSmall, count, 0));
    ASSERT_NO_FATAL_FAILURE(ping(rig, pings));
    EXPECT_TRUE(test::waitUntil([&] { return count.seen() >= m + pings; }));
    EXPECT_EQ(count.seen(), m + pings);

    // npf-recv is gone: the flow's datagrams pass, through the chained program.
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, flowPort, kFlowPort, 20, sizeSmall, count, m + pings));

    const Counters d = delta(rig.xdp(), xdp0);
    EXPECT_EQ(d.at("rx_total"), n + m + pings + 20) << describe(d);
    EXPECT_EQ(d.at("redir_primary") + d.at("redir_backup"), n) << describe(d);
}

INSTANTIATE_TEST_SUITE_P(Modes, XdpChainModes, ::testing::Values("native", "skb"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A program already on the interface (a CNI's): npf_xdp goes in front of it
// in one step and it keeps getting what npf passes; detach puts it back.
TEST_F(XdpChain, TakesOverTheAttachedProgramAndDetachPutsItBack)
{
    Rig rig;
    Counter count(/*frags=*/false);
    KernelSocket other(rig, kOtherPort);
    ASSERT_NO_FATAL_FAILURE(attachNative(rig, count.fd()));
    ASSERT_EQ(linkProg(rig), count.id());
    const uint32_t m = 40;
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, m, sizeSmall, count, 0));

    int st = -1;
    const std::string a = npfctl(rig, "attach " + rig.rxIf() + " --then-existing", &st);
    ASSERT_EQ(st, 0) << a;
    EXPECT_NE(a.find("in its place on the interface"), std::string::npos) << a;
    const nlohmann::json s = status(rig);
    EXPECT_EQ(linkProg(rig), s["prog_id"].get<uint32_t>()) << "npf_xdp is not the program on the interface";
    ASSERT_TRUE(s["next_program"].is_object()) << s.dump();
    EXPECT_EQ(s["next_program"]["id"], count.id());
    EXPECT_TRUE(s["foreign_programs"].empty()) << s.dump();

    ASSERT_NO_FATAL_FAILURE(receiveFlow(rig, 200, sizeVaried));
    EXPECT_EQ(count.seen(), m) << "flow datagrams reached the chained program";
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, m, sizeSmall, count, m));

    const std::string d = npfctl(rig, "detach " + rig.rxIf(), &st);
    ASSERT_EQ(st, 0) << d;
    EXPECT_NE(d.find("put XDP program '" + count.name() + "' (prog id " + std::to_string(count.id()) +
                     "), chained behind npf_xdp, in its place on " + rig.rxIf()),
              std::string::npos) << d;
    EXPECT_EQ(linkProg(rig), count.id()) << "detach did not put the chained program back";
    EXPECT_FALSE(fs::exists(rig.pinDir()));
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, m, sizeSmall, count, 2 * m));
}

// Taking over asks for a program on the interface in npf's mode.
TEST_F(XdpChain, ThenExistingWithoutAProgramSaysSo)
{
    Rig rig;
    int st = -1;
    const std::string a = npfctl(rig, "attach " + rig.rxIf() + " --then-existing", &st);
    EXPECT_EQ(st, 5) << a;
    EXPECT_NE(a.find("--then-existing: " + rig.rxIf() + " has no XDP program in native mode to chain behind npf_xdp"),
              std::string::npos) << a;
    EXPECT_EQ(linkProg(rig), 0u);
    EXPECT_FALSE(fs::exists(rig.pinDir()));
}

// At MTU 9000 a program that is not frags-aware cannot run natively on veth
// (the kernel refuses it above ~3.5 KB): npf_xdp, loaded without frags to
// chain it, is refused with the reason, and runs in skb mode. A frags-aware
// program runs behind a frags-aware npf_xdp natively, jumbo datagrams both
// ways.
TEST_F(XdpChain, FragsRuleAtMtu9000)
{
    Rig rig(test::VethOptions{.mtu = 9000});
    KernelSocket other(rig, kOtherPort);
    {
        Counter plain(/*frags=*/false);
        int st = -1;
        std::string a = npfctl(rig, "attach " + rig.rxIf() + " --then " + plain.pin(), &st);
        EXPECT_NE(st, 0) << a;
        EXPECT_NE(a.find("npf_xdp is loaded without frags support to chain '" + plain.name() + "' (id " +
                         std::to_string(plain.id()) + "), which lacks it, and the driver refuses such a program at "
                         "MTU 9000: lower the MTU, chain a frags-aware program (SEC(\"xdp.frags\")), or try --mode skb"),
                  std::string::npos) << a;
        EXPECT_EQ(linkProg(rig), 0u);
        EXPECT_FALSE(fs::exists(rig.pinDir())) << "a failed attach left pins";

        a = npfctl(rig, "attach " + rig.rxIf() + " --mode skb --then " + plain.pin(), &st);
        ASSERT_EQ(st, 0) << a;
        EXPECT_FALSE(npfKind(rig).frags);
        ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, 10, sizeJumbo, plain, 0));
        // detach puts it in npf_xdp's place, in skb mode; the test takes it off.
        ASSERT_TRUE(rig.npfctlOk("detach " + rig.rxIf()));
        ASSERT_EQ(linkProg(rig), plain.id());
        ASSERT_EQ(test::sh(rig.veth().rxNs().exec() + "ip link set dev " + rig.rxIf() + " xdpgeneric off"), 0);
    }
    Counter frags(/*frags=*/true);
    int st = -1;
    const std::string a = npfctl(rig, "attach " + rig.rxIf() + " --then " + frags.pin(), &st);
    ASSERT_EQ(st, 0) << a;
    EXPECT_TRUE(npfKind(rig).frags);
    ASSERT_NO_FATAL_FAILURE(receiveFlow(rig, 100, sizeJumbo, "9K"));
    EXPECT_EQ(frags.seen(), 0u) << "flow datagrams reached the chained program";
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, 10, sizeJumbo, frags, 0));
}

// The engine (npfd's, npf-recv's) attaching with EngineConfig::xdpThenExisting:
// npf_xdp in front of the program on the interface while it runs, the
// program back in its place when it detaches.
TEST_F(XdpChain, EngineTakesOverAndPutsBackWhenItDetaches)
{
    Rig rig;
    Counter count(/*frags=*/false);
    KernelSocket other(rig, kOtherPort);
    ASSERT_NO_FATAL_FAILURE(attachNative(rig, count.fd()));
    const uint32_t m = 30;
    {
        EngineInNs eng(rig, {.xdpThenExisting = true});
        ASSERT_TRUE(eng->attachedByUs());
        const nlohmann::json s = status(rig);
        EXPECT_EQ(linkProg(rig), s["prog_id"].get<uint32_t>()) << "npf_xdp is not the program on the interface";
        ASSERT_TRUE(s["next_program"].is_object()) << s.dump();
        EXPECT_EQ(s["next_program"]["id"], count.id());
        ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, m, sizeSmall, count, 0));
    }
    EXPECT_EQ(linkProg(rig), count.id()) << "the engine's detach did not put the chained program back";
    EXPECT_FALSE(fs::exists(rig.pinDir()));
    ASSERT_NO_FATAL_FAILURE(throughTheChain(rig, other, kOtherPort, m, sizeSmall, count, m));
}

} // namespace
} // namespace npf::e2e
