// The C API through npfd: capi_client (tests/install/consumer_c/consumer.c, C only) runs as uid
// 65534 in the rx namespace, connects to npfd with npf_client_open, receives
// a stream socat sends from the peer namespace by epoll, and writes it out:
// the output must be the stream, byte for byte.
#include "npfd_rig.h"

#include "engine_fixture.h"

namespace npf::e2e {
namespace {

TEST_F(EngineE2E, CApiClientOfNpfdAsNobodyReceivesTheStream)
{
    constexpr uint16_t kPort = kFirstPort + 30;
    constexpr size_t kSize = 1 << 20; // socat: 1024 datagrams of 1024 bytes
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const std::string in = dir.path + "/in.bin", out = dir.path + "/out.bin", err = dir.path + "/client.err";
    writeStream(in, kSize, 20);
    Child client(rig.veth().rxNs().path(),
                 {"setpriv", "--reuid=" + std::to_string(kNobody), "--regid=65534", "--clear-groups",
                  CAPI_CLIENT_PATH, npfd.socket(), std::to_string(kPort), std::to_string(kSize / 1024), out},
                 err, true);
    ASSERT_TRUE(client.ready()) << npfd.log();
    EXPECT_EQ(socatSend(rig, in, kPort), 0);
    int st = -1;
    ASSERT_TRUE(client.wait(int(test::kDeadline.count()), &st)) << readFile(err);
    EXPECT_EQ(st, 0) << readFile(err) << npfd.log();
    EXPECT_TRUE(readFile(out) == readFile(in)) << "capi_client's output differs from the stream ("
                                               << readFile(out).size() << " of " << kSize << " bytes)";
}

} // namespace
} // namespace npf::e2e
