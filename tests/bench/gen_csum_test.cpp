// The generator's UDP checksums: templateFrame and npfb_gen (run through
// bpf_prog_test_run_opts, each output fed back as the next input as live
// frames are reused) give datagrams whose checksum verifies against an
// independent RFC 1071 reference, or 0 with udpCsum off. Root only.
#include <gtest/gtest.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <netinet/in.h>

#include <cstring>
#include <limits>
#include <memory>

#include "bench_abi.h"
#include "bench_gen.skel.h"
#include "generator.h"
#include "netns.h"
#include "packet_builder.h"
#include "sys/csum.h"

namespace {

using npf::test::foldChecksum;
using npf::test::onesSum;

uint16_t rd16(const std::vector<uint8_t>& f, size_t o) { return uint16_t(f[o] << 8 | f[o + 1]); }

// Network-order reference: pseudo-header + UDP datagram must fold to 0xffff.
bool udpChecksumHolds(const std::vector<uint8_t>& f)
{
    const uint32_t udpLen = rd16(f, NPFB_UDP_OFF + 4);
    uint32_t sum = onesSum({f.data() + 14 + 12, 8}, IPPROTO_UDP + udpLen);
    return foldChecksum(onesSum({f.data() + NPFB_UDP_OFF, udpLen}, sum)) == 0xffff;
}

npf::bench::TrafficConfig traffic(uint32_t payload, uint32_t flows, bool udpCsum)
{
    npf::bench::TrafficConfig c;
    c.srcMac = "02:00:00:00:00:01";
    c.dstMac = "02:00:00:00:00:02";
    c.srcAddr = "198.18.0.1";
    c.dstAddr = "198.18.0.2";
    c.payload = payload;
    c.flows = flows;
    c.udpCsum = udpCsum;
    return c;
}

struct Case {
    const char* name;
    uint32_t payload, flows;
    bool udpCsum;
    uint64_t firstSeq; // npfb_seq before the first run: carries across 32 and 64 bits
    int runs;
};

const Case kCases[] = {
    {"1472 B, one flow", 1472, 1, true, 0, 64},
    {"1472 B, 7 flows", 1472, 7, true, 0, 64},
    {"odd payload (25 B), 3 flows", 25, 3, true, 0, 64},
    {"header only (24 B)", 24, 1, true, 0, 16},
    {"1471 B, seq across 2^32", 1471, 2, true, (1ull << 32) - 8, 16},
    {"64 B, seq wraps 2^64", 64, 5, true, std::numeric_limits<uint64_t>::max() - 8, 16},
    {"checksums off", 1472, 3, false, 0, 16},
};

TEST(GenChecksum, TemplateFrame)
{
    for (const Case& k : kCases) {
        SCOPED_TRACE(k.name);
        const auto f = npf::bench::templateFrame(traffic(k.payload, k.flows, k.udpCsum));
        ASSERT_EQ(f.size(), NPFB_PAYLOAD_OFF + k.payload);
        if (k.udpCsum) {
            EXPECT_TRUE(udpChecksumHolds(f));
            auto g = f;
            g.back() ^= 1; // the reference notices a flipped bit
            EXPECT_FALSE(udpChecksumHolds(g));
        } else {
            EXPECT_EQ(rd16(f, NPFB_UDP_OFF + 6), 0);
        }
    }
}

// The check static-pinned applies (udpCsumHolds, from the payload's sum)
// agrees with the reference: it holds, a flipped payload bit is noticed, and
// a frame without a checksum passes.
TEST(GenChecksum, ReceiverCheckAgreesWithTheReference)
{
    for (const Case& k : kCases) {
        SCOPED_TRACE(k.name);
        auto f = npf::bench::templateFrame(traffic(k.payload, k.flows, k.udpCsum));
        auto holds = [&] {
            const uint64_t payloadSum = npf::csumPartial(f.data() + NPFB_PAYLOAD_OFF, k.payload);
            return npf::bench::udpCsumHolds(f.data(), k.payload, payloadSum);
        };
        EXPECT_TRUE(holds());
        f.back() ^= 1;
        EXPECT_EQ(holds(), !k.udpCsum); // no checksum: nothing to notice
    }
}

struct SkelDeleter {
    void operator()(bench_gen* s) const { bench_gen__destroy(s); }
};

TEST(GenChecksum, EveryGeneratedDatagramVerifies)
{
    if (!npf::test::isRoot())
        GTEST_SKIP() << "loading npfb_gen needs root";
    for (const Case& k : kCases) {
        SCOPED_TRACE(k.name);
        const auto c = traffic(k.payload, k.flows, k.udpCsum);
        std::vector<uint8_t> frame = npf::bench::templateFrame(c);
        std::unique_ptr<bench_gen, SkelDeleter> skel(bench_gen__open());
        ASSERT_TRUE(skel);
        npf::bench::configureGenerator(skel.get(), c, frame);
        ASSERT_EQ(bench_gen__load(skel.get()), 0);
        skel->bss->npfb_seq = k.firstSeq;
        std::vector<uint8_t> out(frame.size());
        for (int i = 0; i < k.runs; i++) {
            SCOPED_TRACE("run " + std::to_string(i));
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                        .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(out.size()), .repeat = 1);
            ASSERT_EQ(bpf_prog_test_run_opts(bpf_program__fd(skel->progs.npfb_gen), &opts), 0);
            ASSERT_EQ(opts.retval, uint32_t(XDP_TX));
            ASSERT_EQ(opts.data_size_out, frame.size());
            npfb_hdr h;
            std::memcpy(&h, out.data() + NPFB_PAYLOAD_OFF, sizeof(h));
            const uint64_t seq = k.firstSeq + uint64_t(i);
            EXPECT_EQ(h.magic, NPFB_MAGIC);
            EXPECT_EQ(h.seq, seq);
            EXPECT_EQ(h.flow, uint32_t(seq % k.flows));
            EXPECT_EQ(rd16(out, NPFB_UDP_OFF), c.sportBase + seq % k.flows);
            if (k.udpCsum) {
                EXPECT_NE(rd16(out, NPFB_UDP_OFF + 6), 0) << "0 means no checksum";
                EXPECT_TRUE(udpChecksumHolds(out)) << npf::test::hexdump({out.data(), 64});
            } else {
                EXPECT_EQ(rd16(out, NPFB_UDP_OFF + 6), 0);
            }
            frame = out; // live frames keep what the previous run wrote
        }
    }
}

} // namespace
