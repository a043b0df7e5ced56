// npf-recv (the real binary) in the rx namespace: killed mid-stream, traffic
// falls back to the kernel stack and a restarted npf-recv resumes from the
// pinned state; and the "done means": a cold npf-recv receives a
// stream a stock tool (socat) sends, byte for byte.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine_fixture.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
constexpr uint16_t kPort = 7300;

uint32_t sizeVaried(uint32_t k) { return 1472 - (k * 37) % 600; }

struct TempDir {
    std::string path;
    TempDir()
    {
        char tmpl[] = "/tmp/npf-e2e-XXXXXX";
        if (!mkdtemp(tmpl))
            throw std::system_error(errno, std::generic_category(), "mkdtemp");
        path = tmpl;
    }
    ~TempDir()
    {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

// Concatenated payloads of sender `sid`, datagrams first .. first+n-1.
std::string streamBytes(uint32_t sid, uint32_t first, uint32_t n)
{
    std::string s;
    for (uint32_t k = first; k < first + n; k++) {
        std::vector<uint8_t> p = payloadFor(senderId(sid, k), sizeVaried(k));
        s.append(p.begin(), p.end());
    }
    return s;
}

// A plain kernel UDP socket bound to the flow port in the rx namespace.
class KernelSocket {
public:
    KernelSocket(Rig& rig, uint16_t port)
    {
        test::NetnsGuard in(rig.veth().rxNs());
        fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int buf = 16 << 20;
        setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        inet_pton(AF_INET, rig.rxAddr().c_str(), &a.sin_addr);
        if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
            throw std::system_error(errno, std::generic_category(), "bind kernel socket");
    }
    ~KernelSocket() { close(fd_); }
    // Every datagram that arrives until none came for `quiet`.
    std::vector<std::string> drain(std::chrono::milliseconds quiet)
    {
        std::vector<std::string> out;
        char buf[2048];
        pollfd p{fd_, POLLIN, 0};
        while (poll(&p, 1, int(quiet.count())) > 0) {
            ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
            if (n >= 0)
                out.emplace_back(buf, size_t(n));
        }
        return out;
    }

private:
    int fd_ = -1;
};

std::vector<std::string> recvArgs(Rig& rig, const std::string& out, bool cold)
{
    std::vector<std::string> a = {NPF_RECV_PATH, rig.rxIf(), std::to_string(kPort), "-o", out};
    if (cold)
        a.push_back("--cold");
    return a;
}

TEST_F(EngineE2E, NpfRecvKilledMidStreamFallsBackAndRestartResumes)
{
    Rig rig;
    TempDir dir;
    KernelSocket kernel(rig, kPort);
    const std::string out1 = dir.path + "/out1", err1 = dir.path + "/err1";
    const std::string out2 = dir.path + "/out2", err2 = dir.path + "/err2";
    const std::string pins = std::string(NPF_PIN_ROOT) + "/" + rig.rxIf();

    // Stream A, killed half-way.
    auto recv1 = std::make_unique<Child>(rig.veth().rxNs().path(), recvArgs(rig, out1, true), err1);
    ASSERT_TRUE(waitForText(err1, "buffers of", 10000)) << readFile(err1);
    const uint32_t n = 20000;
    Counters xdp0 = rig.xdp();
    Sender a(rig.veth(), {.sender = 0, .count = n, .dstPort = kPort, .rate = rate(), .size = sizeVaried});
    a.start();
    while (a.sent() < n / 2 && a.error().empty())
        std::this_thread::sleep_for(1ms);
    recv1->kill(SIGKILL);
    int st = 0;
    ASSERT_TRUE(recv1->wait(5000, &st));
    EXPECT_EQ(st, 128 + SIGKILL);
    a.join();
    ASSERT_EQ(a.error(), "");
    std::vector<std::string> fallback = kernel.drain(300ms);
    Counters d = delta(rig.xdp(), xdp0);

    EXPECT_NE(rig.statusJson().find("\"attached\""), std::string::npos) << "XDP program must survive the kill";
    EXPECT_TRUE(fs::exists(pins)) << pins;
    EXPECT_EQ(d["rx_total"], n) << describe(d);
    EXPECT_GT(d["pass_no_socket"], 0u) << describe(d);
    EXPECT_EQ(d["redir_primary"] + d["redir_backup"] + d["redir_fail"] + d["pass_no_socket"], n) << describe(d);
    EXPECT_EQ(fallback.size(), d["pass_no_socket"] + d["redir_fail"]) << describe(d);
    EXPECT_GE(fallback.size(), n / 4) << "the rest of the stream must reach the kernel socket";

    // The kernel socket got a tail of the stream, in order, bit-exact.
    uint32_t firstFallback = n, prev = 0;
    for (size_t i = 0; i < fallback.size(); i++) {
        const std::string& dg = fallback[i];
        ASSERT_GE(dg.size(), kHeader);
        uint32_t id;
        std::memcpy(&id, dg.data(), 4);
        ASSERT_LT(id, n);
        if (i == 0)
            firstFallback = id;
        else
            ASSERT_GT(id, prev) << "kernel path out of order";
        prev = id;
        std::vector<uint8_t> want = payloadFor(id, sizeVaried(id));
        size_t diff = 0;
        while (diff < std::min(dg.size(), want.size()) && uint8_t(dg[diff]) == want[diff])
            diff++;
        ASSERT_TRUE(dg.size() == want.size() && diff == want.size())
            << "datagram " << id << " damaged on the kernel path: " << dg.size() << " bytes, sent " << want.size()
            << ", first difference at byte " << diff;
    }
    EXPECT_EQ(prev, n - 1);
    EXPECT_EQ(fallback.size(), n - firstFallback) << "the kernel path must get every datagram after the first";

    // npf-recv's output: datagrams 0 .. m-1, whole, in order, up to the kill.
    const std::string got1 = readFile(out1);
    uint32_t m = 0;
    size_t bytes = 0;
    while (m < n && bytes + sizeVaried(m) <= got1.size())
        bytes += sizeVaried(m++);
    EXPECT_EQ(bytes, got1.size()) << "output ends inside datagram " << m;
    EXPECT_TRUE(got1 == streamBytes(0, 0, m)) << "output of the killed npf-recv is not the stream's prefix";
    EXPECT_LE(m, firstFallback);
    std::printf("[ numbers  ] kill: npf-recv wrote %u datagrams, %u in flight at SIGKILL (steered to the dying "
                "sockets), kernel socket got %zu from datagram %u on\n",
                m, firstFallback - m, fallback.size(), firstFallback);

    // Stream B through a restarted npf-recv that takes the flow over.
    Counters xdp1 = rig.xdp();
    auto recv2 = std::make_unique<Child>(rig.veth().rxNs().path(), recvArgs(rig, out2, false), err2);
    ASSERT_TRUE(waitForText(err2, "buffers of", 10000)) << readFile(err2);
    EXPECT_NE(readFile(err2).find("taken over"), std::string::npos) << readFile(err2);
    const uint32_t nb = 10000;
    Sender b(rig.veth(), {.sender = 1, .count = nb, .dstPort = kPort, .rate = rate(), .size = sizeVaried});
    b.start();
    b.join();
    ASSERT_EQ(b.error(), "");
    const std::string wantB = streamBytes(1, 0, nb);
    for (int i = 0; i < 500 && fs::file_size(out2) < wantB.size(); i++)
        std::this_thread::sleep_for(10ms);
    recv2->kill(SIGTERM);
    ASSERT_TRUE(recv2->wait(10000, &st));
    EXPECT_EQ(st, 0) << readFile(err2);
    const std::string got2 = readFile(out2);
    EXPECT_EQ(got2.size(), wantB.size());
    EXPECT_TRUE(got2 == wantB) << "restarted npf-recv output differs from stream B";
    EXPECT_EQ(kernel.drain(100ms).size(), 0u) << "stream B leaked to the kernel stack";
    Counters d2 = delta(rig.xdp(), xdp1);
    EXPECT_EQ(d2["pass_no_socket"], 0u) << describe(d2);
    EXPECT_EQ(d2["redir_primary"] + d2["redir_backup"], nb) << describe(d2);
    EXPECT_NE(rig.statusJson().find("\"attached\""), std::string::npos)
        << "npf-recv must not detach a program it did not attach";
    std::string err2text = readFile(err2);
    std::printf("[ numbers  ] restart: %s", err2text.substr(err2text.find("npf-recv: ")).c_str());

    int rc = -1;
    rig.npfctl("detach --force " + rig.rxIf(), &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_FALSE(fs::exists(pins)) << "detach --force must remove the pins";
}

// Done means: npf-recv on a veth in a namespace, region cold, receives a
// stream sent by a stock tool from the peer namespace, byte for byte.
TEST_F(EngineE2E, NpfRecvColdReceivesSocatStreamByteForByte)
{
    Rig rig;
    TempDir dir;
    const std::string in = dir.path + "/in", out = dir.path + "/out", err = dir.path + "/err";
    const size_t size = 4 << 20;
    {
        std::vector<uint8_t> data = payloadFor(0xfeed, uint32_t(size)); // not a datagram: just bytes
        std::ofstream f(in, std::ios::binary);
        f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    }
    const size_t datagrams = (size + 1023) / 1024;
    std::vector<std::string> args = recvArgs(rig, out, true);
    args.insert(args.end(), {"-n", std::to_string(datagrams), "--idle", "3"});
    Child recv(rig.veth().rxNs().path(), args, err);
    ASSERT_TRUE(waitForText(err, "buffers of", 10000)) << readFile(err);
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(test::sh(rig.veth().txNs().exec() + "socat -u -b 1024 FILE:" + in + " UDP:" + rig.rxAddr() + ":" +
                       std::to_string(kPort)),
              0);
    double sendSec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int st = -1;
    ASSERT_TRUE(recv.wait(30000, &st)) << "npf-recv did not finish";
    EXPECT_EQ(st, 0) << readFile(err);
    const std::string got = readFile(out), want = readFile(in);
    EXPECT_EQ(got.size(), want.size()) << readFile(err);
    EXPECT_TRUE(got == want) << "npf-recv output differs from the file socat sent";
    std::string e = readFile(err);
    std::printf("[ numbers  ] socat: %zu datagrams in %.3f s = %.0f/s; %s", datagrams, sendSec, datagrams / sendSec,
                e.substr(std::min(e.size(), e.find("npf-recv: "))).c_str());
}

} // namespace
} // namespace npf::e2e
