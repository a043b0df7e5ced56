// npfd and its clients across versions (docs/protocol.md, "Versioning"): a
// client of the previous protocol (2: its hello carried the ring layouts in
// "abi", which had to be npfd's) is served end to end by a real npfd, spoken
// to in protocol 2, beside one of the current protocol; a client whose
// library ABI is newer but whose protocol is npfd's is served; a protocol
// two behind, one ahead, or protocol 2 with other ring layouts is refused
// with bad_version naming both sides and what to upgrade, and the
// connection closed.
#include <gtest/gtest.h>

#include "engine_fixture.h"
#include "hostile_client.h"
#include "ipc/protocol.h"
#include "npf/client.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

class NpfdVersions : public EngineE2E {};

// Datagram k of the stream is 1000 bytes.
uint32_t kiloByte(uint32_t) { return 1000; }

TEST_F(NpfdVersions, APreviousProtocolClientIsServedEndToEnd)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    // The hello a client of the previous release sends: protocol 2, and in
    // "abi" the ABI whose ring layouts it maps.
    Hostile old(npfd, "protocol-2", kNobody, ipc::HelloRequest{.protocol = 2, .abi = ipc::kProtocol2Abi});
    EXPECT_EQ(old.helloReply.protocol, 2u) << "spoken to in its own version";
    EXPECT_EQ(old.helloReply.abi, ipc::kProtocol2Abi) << "what a protocol 2 client compares";
    old.region(4 << 20, 4 << 20);
    HostileFlow f = old.openFlow(kFirstPort);
    for (uint32_t i = 0; i < 1024; i++)
        f.post(uint64_t(i) * 4096, 2048);
    f.publish();
    EXPECT_EQ(f.hdr()->version, uint32_t(NPF_RING_LAYOUT_VERSION)) << "the layouts protocol 2 maps";

    // A client of this release beside it, on the same npfd.
    Client now({.socket = npfd.socket(), .regionSize = 4 << 20, .name = "protocol-3"});
    Flow& nf = now.openFlow(kFirstPort + 1);
    for (uint32_t i = 0; i < 64; i++)
        nf.post(uint64_t(i) * 4096, 2048);
    nf.flush();

    constexpr uint32_t kN = 1000;
    std::vector<npf_completion> got;
    ASSERT_TRUE(receive(rig, f, kFirstPort, 41, kN, kiloByte, 256, got)) << npfd.log();
    EXPECT_TRUE(old.holds(got, 41, 1000));
    {
        Sender tx(rig.veth(), {.sender = 42, .count = 32, .dstPort = uint16_t(kFirstPort + 1), .size = kiloByte});
        tx.start();
        tx.join();
        ASSERT_EQ(tx.error(), "");
    }
    npf_completion c[32];
    EXPECT_EQ(awaitCompletions(nf, c), 32u) << npfd.log();
    EXPECT_TRUE(old.leave());
    EXPECT_NE(npfd.log().find("protocol 2, library ABI " + std::to_string(ipc::kProtocol2Abi)), std::string::npos)
        << npfd.log();
}

TEST_F(NpfdVersions, OtherVersionsAreRefusedNamingBothSides)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    // Same protocol, a newer library (its ABI moved on without the wire): served.
    HelloAnswer newerLibrary =
        helloAs(kNobody, npfd.socket(), ipc::HelloRequest{.abi = NPF_ABI_VERSION + 1, .name = "newer-library"});
    EXPECT_EQ(newerLibrary.answer, "ok") << newerLibrary.message;

    const std::string npfdSide = "npfd speaks protocol " + std::to_string(ipc::kOldestProtocol) + " or " +
                                 std::to_string(ipc::kProtocolVersion);
    struct Refused {
        ipc::HelloRequest hello;
        std::string fix;
    };
    // Built field by field: GCC 12 at -O3 takes the strings of a braced
    // array of these for maybe-uninitialized (-Werror, Release).
    auto refusal = [](ipc::HelloRequest hello, const char* name, const char* fix) {
        Refused r{std::move(hello), fix};
        r.hello.name = name;
        return r;
    };
    const std::vector<Refused> refused = {
        refusal({.protocol = ipc::kOldestProtocol - 1}, "two-behind", "upgrade the client"),
        refusal({.protocol = ipc::kProtocolVersion + 1}, "one-ahead", "upgrade npfd"),
        refusal({.protocol = 2, .abi = ipc::kProtocol2Abi - 1}, "other-layouts", "upgrade the client"),
    };
    for (const auto& r : refused) {
        HelloAnswer a = helloAs(kNobody, npfd.socket(), r.hello);
        EXPECT_EQ(a.answer, "bad_version") << r.hello.name << ": " << a.message;
        EXPECT_NE(a.message.find("client speaks protocol " + std::to_string(r.hello.protocol)), std::string::npos)
            << a.message;
        EXPECT_NE(a.message.find(npfdSide), std::string::npos) << a.message;
        EXPECT_NE(a.message.find(r.fix), std::string::npos) << a.message;
        EXPECT_TRUE(a.closed) << r.hello.name << ": npfd closes the connection";
    }
    // And the current client is served as ever.
    EXPECT_EQ(helloAs(kNobody, npfd.socket()).answer, "ok");
}

} // namespace
} // namespace npf::e2e
