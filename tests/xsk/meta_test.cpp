// validateMeta: table of good and bad metas (pure, no root needed).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "xsk/meta.h"

namespace npf::xsk {
namespace {

constexpr uint32_t kFrame = 4096;
constexpr uint32_t kPktOff = 256;
constexpr uint32_t kPayloadOff = 42; // Eth + IPv4 + UDP
constexpr uint64_t kRegion = 1 << 20;

struct Input {
    npf_meta meta;
    uint32_t pktOff = kPktOff;
    uint32_t pktLen = kPayloadOff + 100;
    uint32_t frameLen = kFrame;
    RingKind ring = RingKind::Primary;
};

Input good()
{
    Input in;
    in.meta = npf_meta{};
    in.meta.magic = NPF_META_MAGIC;
    in.meta.version = NPF_META_VERSION;
    in.meta.flags = 0;
    in.meta.flow = 3;
    in.meta.payload_off = kPayloadOff;
    in.meta.seq = 17;
    in.meta.len = 100;
    in.meta.offset = 8192 + 5;
    in.meta.tstamp = 123456789;
    return in;
}

struct Case {
    const char* name;
    std::function<void(Input&)> edit;
    MetaStatus want;
};

const std::vector<Case>& cases()
{
    static const std::vector<Case> c = {
        {"good primary", [](Input&) {}, MetaStatus::Ok},
        {"good backup", [](Input& i) { i.meta.flags = NPF_META_F_BACKUP; i.ring = RingKind::Backup; }, MetaStatus::Ok},
        {"good truncated", [](Input& i) { i.meta.flags = NPF_META_F_TRUNCATED; }, MetaStatus::Ok},
        {"empty payload", [](Input& i) { i.meta.len = 0; }, MetaStatus::Ok},
        {"payload ends at packet end", [](Input& i) { i.pktLen = kPayloadOff + 100; }, MetaStatus::Ok},
        {"buffer ends at region end", [](Input& i) { i.meta.offset = kRegion - 100; }, MetaStatus::Ok},
        {"packet at frame end", [](Input& i) { i.pktOff = kFrame - i.pktLen; }, MetaStatus::Ok},
        {"meta at frame start", [](Input& i) { i.pktOff = sizeof(npf_meta); }, MetaStatus::Ok},
        {"no room for meta", [](Input& i) { i.pktOff = sizeof(npf_meta) - 1; }, MetaStatus::BadDescriptor},
        {"packet past frame end", [](Input& i) { i.pktOff = kFrame - i.pktLen + 1; }, MetaStatus::BadDescriptor},
        {"packet offset past frame", [](Input& i) { i.pktOff = kFrame + 64; i.pktLen = 0; }, MetaStatus::BadDescriptor},
        {"huge packet length", [](Input& i) { i.pktLen = std::numeric_limits<uint32_t>::max(); },
         MetaStatus::BadDescriptor},
        {"bad magic", [](Input& i) { i.meta.magic = 0x504e; }, MetaStatus::BadMagic},
        {"zeroed meta", [](Input& i) { i.meta = npf_meta{}; }, MetaStatus::BadMagic},
        {"bad version", [](Input& i) { i.meta.version = NPF_META_VERSION + 1; }, MetaStatus::BadVersion},
        {"unknown flag bit", [](Input& i) { i.meta.flags = 0x80; }, MetaStatus::BadFlags},
        {"backup flag on primary ring", [](Input& i) { i.meta.flags = NPF_META_F_BACKUP; }, MetaStatus::WrongRing},
        {"no backup flag on backup ring", [](Input& i) { i.ring = RingKind::Backup; }, MetaStatus::WrongRing},
        {"flow not open", [](Input& i) { i.meta.flow = 4; }, MetaStatus::UnknownFlow},
        {"flow id out of range", [](Input& i) { i.meta.flow = 0xffff; }, MetaStatus::UnknownFlow},
        {"len above max payload",
         [](Input& i) { i.meta.len = NPF_MAX_PAYLOAD + 1; i.pktLen = kPayloadOff + NPF_MAX_PAYLOAD + 1; i.frameLen = 16384; },
         MetaStatus::TooLong},
        {"len huge", [](Input& i) { i.meta.len = std::numeric_limits<uint32_t>::max(); }, MetaStatus::TooLong},
        {"payload past packet end", [](Input& i) { i.pktLen = kPayloadOff + 99; }, MetaStatus::PayloadOutsideFrame},
        {"payload offset past packet", [](Input& i) { i.meta.payload_off = 0xffff; i.meta.len = 0; },
         MetaStatus::PayloadOutsideFrame},
        {"buffer past region end", [](Input& i) { i.meta.offset = kRegion - 99; }, MetaStatus::OutsideRegion},
        {"buffer offset past region", [](Input& i) { i.meta.offset = kRegion + 1; i.meta.len = 0; },
         MetaStatus::OutsideRegion},
        {"offset + len wraps", [](Input& i) { i.meta.offset = std::numeric_limits<uint64_t>::max() - 10; },
         MetaStatus::OutsideRegion},
    };
    return c;
}

TEST(ValidateMeta, Table)
{
    FlowSet flows;
    flows.open(3);
    flows.open(NPF_MAX_FLOWS - 1);
    for (const Case& c : cases()) {
        SCOPED_TRACE(c.name);
        Input in = good();
        c.edit(in);
        // Poison everything around the packet so a check that reads the wrong bytes shows.
        std::vector<uint8_t> frame(in.frameLen, 0xa5);
        if (in.pktOff >= sizeof(npf_meta) && in.pktOff <= in.frameLen)
            std::memcpy(frame.data() + in.pktOff - sizeof(npf_meta), &in.meta, sizeof(npf_meta));
        FrameView v{frame, in.pktOff, in.pktLen};
        npf_meta out{};
        MetaStatus got = validateMeta(v, kRegion, flows, in.ring, &out);
        EXPECT_EQ(got, c.want) << metaStatusName(got) << " != " << metaStatusName(c.want);
        if (got == MetaStatus::Ok) {
            EXPECT_EQ(std::memcmp(&out, &in.meta, sizeof(out)), 0);
        }
    }
}

TEST(ValidateMeta, UnalignedMeta)
{
    FlowSet flows;
    flows.open(3);
    Input in = good();
    in.pktOff = 301; // meta at 269: not 8-byte aligned
    std::vector<uint8_t> frame(kFrame, 0);
    std::memcpy(frame.data() + in.pktOff - sizeof(npf_meta), &in.meta, sizeof(npf_meta));
    npf_meta out{};
    ASSERT_EQ(validateMeta({frame, in.pktOff, in.pktLen}, kRegion, flows, RingKind::Primary, &out), MetaStatus::Ok);
    EXPECT_EQ(out.offset, in.meta.offset);
    EXPECT_EQ(out.tstamp, in.meta.tstamp);
}

TEST(ValidateMeta, ClosingAFlowRejectsIt)
{
    FlowSet flows;
    Input in = good();
    std::vector<uint8_t> frame(kFrame, 0);
    std::memcpy(frame.data() + in.pktOff - sizeof(npf_meta), &in.meta, sizeof(npf_meta));
    npf_meta out{};
    FrameView v{frame, in.pktOff, in.pktLen};
    EXPECT_EQ(validateMeta(v, kRegion, flows, RingKind::Primary, &out), MetaStatus::UnknownFlow);
    flows.open(3);
    EXPECT_EQ(validateMeta(v, kRegion, flows, RingKind::Primary, &out), MetaStatus::Ok);
    flows.close(3);
    EXPECT_EQ(validateMeta(v, kRegion, flows, RingKind::Primary, &out), MetaStatus::UnknownFlow);
    flows.open(NPF_MAX_FLOWS + 5); // ignored, not UB
    EXPECT_FALSE(flows.contains(NPF_MAX_FLOWS + 5));
}

TEST(ValidateMeta, EveryStatusHasAName)
{
    for (size_t i = 0; i < size_t(MetaStatus::Count); i++)
        EXPECT_STRNE(metaStatusName(MetaStatus(i)), "?") << i;
}

} // namespace
} // namespace npf::xsk
