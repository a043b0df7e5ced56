// The sender's side of credits, apart from the socket: which of its
// datagrams it may send now, from the credits it has heard
// (npf_credit, npf/abi.h; the receiver's side is engine/credits.h).
//
// The receiver counts a sender's datagrams from the first one it saw in an
// epoch; the sender counts every datagram it sent. `start_` is the sender's
// count at the receiver's 0 of the current epoch, so the sender's next
// datagram is the receiver's number sent - start_, and may go while that is
// below the grant. Before the first credit, `initial` datagrams may go.
#pragma once

#include <cstdint>

#include "npf/abi.h"

namespace npf {

class CreditWindow {
public:
    explicit CreditWindow(uint64_t initial) noexcept : limit_(initial) {}

    // A credit heard (fields in host order). A new epoch: the receiver began
    // counting anew, at most `received` of ours ago; the first one is ours
    // from the start. Returns false for one that is no use (an older
    // grant of this epoch).
    bool take(uint32_t epoch, uint64_t received, uint64_t limit, uint64_t sent) noexcept
    {
        if (!heard_ || epoch != epoch_) {
            const bool first = !heard_;
            heard_ = true;
            epoch_ = epoch;
            start_ = first && received <= sent ? 0 : sent - (received <= sent ? received : sent);
            limit_ = limit;
            received_ = received;
            rebased_ += first ? 0 : 1;
            return true;
        }
        if (received > received_)
            received_ = received;
        if (limit <= limit_)
            return false;
        limit_ = limit;
        return true;
    }
    // Datagrams that may go now, given `sent` so far.
    uint64_t room(uint64_t sent) const noexcept
    {
        const uint64_t next = sent - start_;
        return limit_ > next ? limit_ - next : 0;
    }
    // The receiver has seen fewer of ours than were sent and no credit came
    // for a long while: the rest were lost on the way; count from what it
    // saw. Returns the datagrams written off.
    uint64_t writeOff(uint64_t sent) noexcept
    {
        const uint64_t next = sent - start_;
        if (!heard_ || next <= received_)
            return 0;
        const uint64_t lost = next - received_;
        start_ += lost;
        return lost;
    }
    bool heard() const noexcept { return heard_; }
    uint64_t limit() const noexcept { return limit_; }
    uint64_t received() const noexcept { return received_; }
    uint64_t rebased() const noexcept { return rebased_; }

private:
    bool heard_ = false;
    uint32_t epoch_ = 0;
    uint64_t start_ = 0, limit_, received_ = 0, rebased_ = 0;
};

} // namespace npf
