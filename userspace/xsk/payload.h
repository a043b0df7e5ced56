// The payload of a received datagram as it lies in its UMEM frames: one piece,
// or several when the packet spans frames (multi-buffer: jumbo frames). Copies
// and Internet checksums over the pieces, positioned by their offset in the
// payload (a piece can start at an odd offset: csumAddAt).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sys/csum.h"
#include "xsk/queue.h"

namespace npf::xsk {

// Copies the first meta.len payload bytes (the part to place) to dst. With
// sum, returns their ones' complement sum (unfolded), else 0.
inline uint64_t copyPlaced(uint8_t* dst, const RxPacket& p, bool sum) noexcept
{
    uint32_t want = p.meta.len;
    if (p.pieces == 1) {
        if (!sum) {
            std::memcpy(dst, p.payload, want);
            return 0;
        }
        return csumCopy(dst, p.payload, want);
    }
    uint64_t s = 0;
    uint32_t at = 0;
    for (uint32_t i = 0; i < p.pieces && want; i++) {
        const uint32_t n = std::min(p.piece[i].len, want);
        if (sum)
            s = csumAddAt(s, csumCopy(dst + at, p.piece[i].data, n), at);
        else
            std::memcpy(dst + at, p.piece[i].data, n);
        at += n;
        want -= n;
    }
    return s;
}

// Sum of the payload bytes [from, from + len) (unfolded), positioned at `from`.
inline uint64_t sumPayload(const RxPacket& p, uint32_t from, uint32_t len) noexcept
{
    if (p.pieces == 1)
        return csumAddAt(0, csumPartial(p.payload + from, len), from);
    uint64_t s = 0;
    uint32_t at = 0; // payload offset of piece i
    for (uint32_t i = 0; i < p.pieces && len; i++) {
        const PayloadPiece& pc = p.piece[i];
        if (from >= at + pc.len) {
            at += pc.len;
            continue;
        }
        const uint32_t off = from - at, n = std::min(pc.len - off, len);
        s = csumAddAt(s, csumPartial(pc.data + off, n), from);
        from += n;
        len -= n;
        at += pc.len;
    }
    return s;
}

// The datagram's UDP checksum holds (or it has none), given the sum of its
// first meta.len payload bytes (copyPlaced or sumPayload(p, 0, meta.len)).
// The tail of a truncated datagram (not placed) is summed here.
inline bool csumHolds(const RxPacket& p, uint64_t placedSum) noexcept
{
    if (p.meta.flags & NPF_META_F_NO_CSUM)
        return true;
    uint64_t sum = placedSum + p.meta.csum;
    if (p.tail)
        sum += sumPayload(p, p.meta.len, p.tail);
    return csumFold(sum) == 0xffff;
}

} // namespace npf::xsk
