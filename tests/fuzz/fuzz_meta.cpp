// xsk::validateMeta and truncatedTail on a frame of arbitrary bytes with an
// arbitrary descriptor (pktOff, pktLen), region size, open flows and ring,
// checked against a reference written from meta.h in 128-bit arithmetic. The
// frame is a heap block of exactly its size, so ASan reports any read outside it.
//
// Input: 24 control bytes, then the frame.
//   [0] bit 0 ring is Backup; bit 1 write the magic and version before pktOff;
//       bit 2 also make flags, ring and flow agree; bit 3 pktOff inside the
//       frame; bit 4 pktLen inside the rest of the frame; bit 5 small region
//   [1] open flows 0..7 (bit mask)   [2..3] one more open flow id
//   [4..7] pktOff   [8..11] pktLen   [12..19] region bytes   [20..23] unused
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "fuzz_check.h"
#include "xsk/meta.h"

namespace {

using npf::xsk::FlowSet;
using npf::xsk::FrameView;
using npf::xsk::MetaStatus;
using npf::xsk::RingKind;
using u128 = unsigned __int128;

template <class T>
T load(const uint8_t* p)
{
    T v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

// meta.h's contract, checks in the documented order.
MetaStatus reference(const FrameView& f, uint64_t region, const FlowSet& flows, RingKind ring, npf_meta* out)
{
    if (f.pktOff < sizeof(npf_meta) || u128(f.pktOff) + f.pktLen > f.frame.size())
        return MetaStatus::BadDescriptor;
    npf_meta m;
    std::memcpy(&m, f.frame.data() + f.pktOff - sizeof(npf_meta), sizeof(m));
    if (m.magic != NPF_META_MAGIC)
        return MetaStatus::BadMagic;
    if (m.version != NPF_META_VERSION)
        return MetaStatus::BadVersion;
    if (m.flags & ~(NPF_META_F_BACKUP | NPF_META_F_TRUNCATED | NPF_META_F_NO_CSUM))
        return MetaStatus::BadFlags;
    if (bool(m.flags & NPF_META_F_BACKUP) != (ring == RingKind::Backup))
        return MetaStatus::WrongRing;
    if (!flows.contains(m.flow))
        return MetaStatus::UnknownFlow;
    if (m.len > NPF_MAX_PAYLOAD)
        return MetaStatus::TooLong;
    if (u128(m.payload_off) + m.len > f.pktLen)
        return MetaStatus::PayloadOutsideFrame;
    if (u128(m.offset) + m.len > region)
        return MetaStatus::OutsideRegion;
    *out = m;
    return MetaStatus::Ok;
}

// truncatedTail's contract: the UDP payload the packet holds (UDP length
// field minus its header, bounded by the packet) beyond the m.len placed.
uint32_t referenceTail(const FrameView& f, const npf_meta& m)
{
    if (m.payload_off < 8)
        return 0;
    const uint8_t* p = f.frame.data() + f.pktOff;
    const uint32_t udpLen = uint32_t(p[m.payload_off - 4]) << 8 | p[m.payload_off - 3];
    const uint64_t udpPayload = udpLen < 8 ? 0 : udpLen - 8;
    const uint64_t held = std::min<uint64_t>(udpPayload, f.pktLen - m.payload_off);
    return held > m.len ? uint32_t(held - m.len) : 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    constexpr size_t kCtl = 24;
    if (size < kCtl)
        return 0;
    const uint8_t mode = data[0];
    const size_t n = size - kCtl;
    std::unique_ptr<uint8_t[]> frame(new uint8_t[n]);
    if (n)
        std::memcpy(frame.get(), data + kCtl, n);

    const RingKind ring = (mode & 1) ? RingKind::Backup : RingKind::Primary;
    FlowSet flows;
    for (uint32_t id = 0; id < 8; id++)
        if (data[1] & (1u << id))
            flows.open(id);
    flows.open(load<uint16_t>(data + 2));
    uint32_t pktOff = load<uint32_t>(data + 4), pktLen = load<uint32_t>(data + 8);
    uint64_t region = load<uint64_t>(data + 12);
    if (mode & 8)
        pktOff = uint32_t(pktOff % (n + 1));
    if ((mode & 16) && pktOff <= n)
        pktLen = uint32_t(pktLen % (n - pktOff + 1));
    if (mode & 32)
        region %= 1u << 24;
    if ((mode & 2) && pktOff >= sizeof(npf_meta) && pktOff <= n) {
        npf_meta m;
        std::memcpy(&m, frame.get() + pktOff - sizeof(m), sizeof(m));
        m.magic = NPF_META_MAGIC;
        m.version = NPF_META_VERSION;
        if (mode & 4) {
            m.flags &= NPF_META_F_TRUNCATED | NPF_META_F_NO_CSUM;
            m.flags |= ring == RingKind::Backup ? NPF_META_F_BACKUP : 0;
            m.flow = data[1] ? uint16_t(__builtin_ctz(data[1])) : load<uint16_t>(data + 2);
        }
        std::memcpy(frame.get() + pktOff - sizeof(m), &m, sizeof(m));
    }

    const FrameView f{std::span<const uint8_t>(frame.get(), n), pktOff, pktLen};
    npf_meta got{}, want{};
    const MetaStatus s = npf::xsk::validateMeta(f, region, flows, ring, &got);
    const MetaStatus r = reference(f, region, flows, ring, &want);
    NPF_FUZZ_CHECK(s == r, "validateMeta says %s, the reference %s (frame %zu, pktOff %u, pktLen %u, region %llu)",
                   npf::xsk::metaStatusName(s), npf::xsk::metaStatusName(r), n, pktOff, pktLen,
                   (unsigned long long)region);
    NPF_FUZZ_CHECK(npf::xsk::metaStatusName(s) != nullptr, "no name");
    if (s != MetaStatus::Ok)
        return 0;
    NPF_FUZZ_CHECK(std::memcmp(&got, &want, sizeof(got)) == 0, "meta copied wrong");

    // What the worker then does: read the payload and place it in the region.
    const uint64_t start = uint64_t(pktOff) + got.payload_off;
    NPF_FUZZ_CHECK(start + got.len <= uint64_t(pktOff) + pktLen && start + got.len <= n, "payload outside the packet");
    NPF_FUZZ_CHECK(u128(got.offset) + got.len <= region, "destination outside the region");
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < got.len; i++)
        sink = sink ^ frame[start + i];
    const uint32_t tail = npf::xsk::truncatedTail(f, got);
    NPF_FUZZ_CHECK(tail == referenceTail(f, got), "truncatedTail %u, reference %u", tail, referenceTail(f, got));
    NPF_FUZZ_CHECK(uint64_t(got.payload_off) + got.len + tail <= pktLen, "tail %u beyond the packet", tail);
    return 0;
}
