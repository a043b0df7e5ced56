#include "xsk/meta.h"

#include <algorithm>
#include <cstring>

namespace npf::xsk {

const char* metaStatusName(MetaStatus s) noexcept
{
    switch (s) {
    case MetaStatus::Ok: return "ok";
    case MetaStatus::BadDescriptor: return "bad_descriptor";
    case MetaStatus::BadMagic: return "bad_magic";
    case MetaStatus::BadVersion: return "bad_version";
    case MetaStatus::BadFlags: return "bad_flags";
    case MetaStatus::WrongRing: return "wrong_ring";
    case MetaStatus::UnknownFlow: return "unknown_flow";
    case MetaStatus::TooLong: return "too_long";
    case MetaStatus::PayloadOutsideFrame: return "payload_outside_frame";
    case MetaStatus::OutsideRegion: return "outside_region";
    case MetaStatus::Count: break;
    }
    return "?";
}

MetaStatus validateMeta(const FrameView& f, uint64_t regionBytes, const FlowSet& flows, RingKind ring,
                        npf_meta* out) noexcept
{
    constexpr uint32_t kMeta = sizeof(npf_meta);
    const uint64_t frameLen = f.frame.size();
    if (f.pktOff < kMeta || f.pktOff > frameLen || f.pktLen > frameLen - f.pktOff)
        return MetaStatus::BadDescriptor;

    npf_meta m;
    std::memcpy(&m, f.frame.data() + f.pktOff - kMeta, kMeta); // the meta need not be aligned
    if (m.magic != NPF_META_MAGIC)
        return MetaStatus::BadMagic;
    if (m.version != NPF_META_VERSION)
        return MetaStatus::BadVersion;
    if (m.flags & ~(NPF_META_F_BACKUP | NPF_META_F_TRUNCATED | NPF_META_F_NO_CSUM))
        return MetaStatus::BadFlags;
    if (((m.flags & NPF_META_F_BACKUP) != 0) != (ring == RingKind::Backup))
        return MetaStatus::WrongRing;
    if (!flows.contains(m.flow))
        return MetaStatus::UnknownFlow;
    if (m.len > NPF_MAX_PAYLOAD)
        return MetaStatus::TooLong;
    // The headers lie in the first frame; the payload may go on in the fragments.
    if (m.payload_off > f.pktLen || m.len > uint64_t(f.pktLen) + f.fragLen - m.payload_off)
        return MetaStatus::PayloadOutsideFrame;
    if (m.offset > regionBytes || m.len > regionBytes - m.offset)
        return MetaStatus::OutsideRegion;
    *out = m;
    return MetaStatus::Ok;
}

uint32_t truncatedTail(const FrameView& f, const npf_meta& m) noexcept
{
    if (m.payload_off < 8) // no room for a UDP header: the checksum cannot hold
        return 0;
    const uint8_t* udpLen = f.frame.data() + f.pktOff + m.payload_off - 4;
    const uint32_t datagram = (uint32_t(udpLen[0]) << 8 | udpLen[1]);
    const uint64_t inPacket = uint64_t(f.pktLen) + f.fragLen - m.payload_off;
    const uint32_t payload = uint32_t(std::min<uint64_t>(datagram < 8 ? 0 : datagram - 8, inPacket));
    return payload > m.len ? payload - m.len : 0;
}

} // namespace npf::xsk
