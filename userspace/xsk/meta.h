// Validation of the npf_meta that XDP writes in front of every steered frame.
// Nothing is written to the region on the strength of a meta that failed here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>

#include "npf/abi.h"

namespace npf::xsk {

// Flow ids that are open: written by the control plane, read by workers and
// the pager for every frame.
class FlowSet {
public:
    void open(uint32_t id) noexcept
    {
        if (id < NPF_MAX_FLOWS)
            words_[id / 64].fetch_or(bit(id), std::memory_order_release);
    }
    void close(uint32_t id) noexcept
    {
        if (id < NPF_MAX_FLOWS)
            words_[id / 64].fetch_and(~bit(id), std::memory_order_release);
    }
    bool contains(uint32_t id) const noexcept
    {
        return id < NPF_MAX_FLOWS && (words_[id / 64].load(std::memory_order_acquire) & bit(id));
    }

private:
    static constexpr uint64_t bit(uint32_t id) noexcept { return 1ull << (id % 64); }
    std::array<std::atomic<uint64_t>, (NPF_MAX_FLOWS + 63) / 64> words_{};
};

// Which ring a frame came from: the meta's BACKUP flag must agree.
enum class RingKind : uint8_t { Primary, Backup };

// Result of validateMeta, in the order the checks run.
enum class MetaStatus : uint8_t {
    Ok = 0,
    BadDescriptor, // packet not inside its frame, or no room for the meta in front of it
    BadMagic,
    BadVersion,
    BadFlags,      // unknown flag bits
    WrongRing,     // BACKUP flag disagrees with the ring the frame arrived on
    UnknownFlow,   // flow id not open
    TooLong,       // len > NPF_MAX_PAYLOAD
    PayloadOutsideFrame, // payload_off + len beyond the packet
    OutsideRegion, // offset + len beyond the region
    Count
};

const char* metaStatusName(MetaStatus s) noexcept;

// A frame as the RX descriptor describes it: the whole frame (chunk) and the
// packet's offset and length inside it. A multi-buffer packet (XDP_USE_SG:
// jumbo frames) continues in the frames of the next descriptors: fragLen is
// how many bytes of it they hold (0 for a packet in one frame).
struct FrameView {
    std::span<const uint8_t> frame;
    uint32_t pktOff = 0;
    uint32_t pktLen = 0;
    uint32_t fragLen = 0;
};

// Pure check of the meta in the sizeof(npf_meta) bytes before the packet.
// On Ok, *out holds the meta and the payload is the packet's bytes
// [out->payload_off, + out->len) -- all in this frame when fragLen is 0, else
// starting in it (the headers are always in the first frame) and going on in
// the fragments -- destined for region[out->offset, + out->len), both in bounds.
MetaStatus validateMeta(const FrameView& f, uint64_t regionBytes, const FlowSet& flows, RingKind ring,
                        npf_meta* out) noexcept;

// For a meta that passed validateMeta: the UDP payload bytes the packet holds
// after the first m.len (the part of a truncated datagram that is not
// placed), from the UDP header's length, bounded by the packet (fragments
// included).
uint32_t truncatedTail(const FrameView& f, const npf_meta& m) noexcept;

// XDP stamped the frame (npf_meta.tstamp): every backup frame, a sample of
// the primary ones.
inline bool stamped(const npf_meta& m) noexcept { return m.tstamp != 0; }

// CLOCK_MONOTONIC ns at which XDP steered a stamped frame, from the meta's
// low 32 bits of it and a later reading nowNs (exact for frames younger than
// 2 s); 0 for a frame not stamped.
inline uint64_t steeredAtNs(const npf_meta& m, uint64_t nowNs) noexcept
{
    if (!stamped(m))
        return 0;
    const int32_t age = static_cast<int32_t>(static_cast<uint32_t>(nowNs) - m.tstamp);
    return age > 0 ? nowNs - static_cast<uint32_t>(age) : nowNs;
}

} // namespace npf::xsk
