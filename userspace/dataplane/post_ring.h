// A flow's post ring: NPF_POST_RING_SIZE npf_post slots and the flow's
// npf_cursor, both in BPF_F_MMAPABLE maps that XDP, the engine and the
// application share (FlowRing, flow_ring.h, checks a map's shape when it
// maps it). The views hold plain pointers into their own process's mapping;
// nothing inside the shared memory is a pointer.
//
// Who writes what:
//   PostProducer (the application side)  slots, cursor.prod, NPF_CURSOR_F_SERVED
//   XDP                                  cursor.cons (CAS claim of the next seq)
//   PostReader (the engine side, npfctl) nothing: reads slots and both indexes
//
// Orderings, stated once:
//   - the producer writes a slot's fields (relaxed), then stores prod with
//     release; XDP and readers load prod with acquire before reading slots
//     below it;
//   - a slot is rewritten only after the seq it held was completed and polled
//     (the producer bounds itself: produced - polled <= NPF_POST_RING_SIZE), so
//     a reader of slot(seq) for a claimed, uncompleted seq never races a write;
//   - cons is loaded with acquire: every seq below it was claimed by XDP;
//   - SERVED is set (release) after the first prod store, so XDP never claims
//     a post before it is visible, and cleared (release) before prod is
//     pulled back to cons when the flow is withdrawn.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "npf/abi.h"

namespace npf::dataplane {

// One post as a reader sees it.
struct Post {
    uint64_t offset;
    uint32_t len;
};

namespace detail {
template <typename T>
T loadAcquire(const T& v) noexcept
{
    return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}
template <typename T>
T loadRelaxed(const T& v) noexcept
{
    return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_relaxed);
}
template <typename T>
void storeRelease(T& v, std::type_identity_t<T> x) noexcept
{
    std::atomic_ref<T>(v).store(x, std::memory_order_release);
}
template <typename T>
void storeRelaxed(T& v, std::type_identity_t<T> x) noexcept
{
    std::atomic_ref<T>(v).store(x, std::memory_order_relaxed);
}
} // namespace detail

// Read-only view of the slots (the sequencer's and the engine's view).
class PostSlots {
public:
    static constexpr uint64_t kSize = NPF_POST_RING_SIZE;
    static constexpr uint64_t kMask = kSize - 1;

    PostSlots() noexcept = default;
    explicit PostSlots(const npf_post* slots) noexcept : slots_(slots) {}

    // The post of seq (slot seq mod size); see the ordering rules above.
    Post at(uint64_t seq) const noexcept
    {
        const npf_post& p = slots_[seq & kMask];
        return {detail::loadRelaxed(p.offset), detail::loadRelaxed(p.len)};
    }
    explicit operator bool() const noexcept { return slots_ != nullptr; }

private:
    const npf_post* slots_ = nullptr;
};

// The engine's view of a flow's post ring.
class PostReader {
public:
    PostReader(const npf_post* slots, const npf_cursor* cursor) noexcept : slots_(slots), cursor_(cursor) {}

    Post slot(uint64_t seq) const noexcept { return slots_.at(seq); }
    PostSlots slots() const noexcept { return slots_; }
    // Next seq XDP will claim: every seq below it was claimed.
    uint64_t consumed() const noexcept { return detail::loadAcquire(cursor_->cons); }
    // Posts visible to XDP.
    uint64_t published() const noexcept { return detail::loadAcquire(cursor_->prod); }

private:
    PostSlots slots_;
    const npf_cursor* cursor_;
};

// The application's side: writes posts and publishes them to XDP. One thread.
class PostProducer {
public:
    // Starts at the cursor's cons: posts a previous producer left behind are
    // discarded (prod is pulled back to cons).
    PostProducer(npf_post* slots, npf_cursor* cursor) noexcept
        : slots_(slots), cursor_(cursor), start_(detail::loadAcquire(cursor->cons)), prod_(start_),
          published_(start_)
    {
        detail::storeRelease(cursor_->prod, start_);
    }
    PostProducer(const PostProducer&) = delete;
    PostProducer& operator=(const PostProducer&) = delete;

    // Writes the post of seq produced(); invisible to XDP until publish().
    // The caller keeps produced() - (seqs it polled) <= NPF_POST_RING_SIZE.
    void post(uint64_t offset, uint32_t len) noexcept
    {
        npf_post& p = slots_[prod_ & PostSlots::kMask];
        detail::storeRelaxed(p.offset, offset);
        detail::storeRelaxed(p.len, len);
        ++prod_;
    }
    // Makes every post so far visible to XDP; the first publish also marks
    // the flow served. False if there was nothing to publish.
    bool publish() noexcept
    {
        if (published_ == prod_)
            return false;
        detail::storeRelease(cursor_->prod, published_ = prod_);
        if (!served_) {
            std::atomic_ref<uint32_t>(cursor_->flags).fetch_or(NPF_CURSOR_F_SERVED, std::memory_order_release);
            served_ = true;
        }
        return true;
    }

    uint64_t start() const noexcept { return start_; }       // first seq of this producer
    uint64_t produced() const noexcept { return prod_; }     // posts written
    uint64_t unpublished() const noexcept { return prod_ - published_; }
    // Posts visible to XDP, as the cursor says: any thread may ask.
    uint64_t published() const noexcept { return detail::loadAcquire(cursor_->prod); }

    // No one serves the flow any more and its posts are gone: XDP passes its
    // datagrams to the kernel. For a cursor with or without a producer (an
    // engine starting over the posts a dead one left).
    static void withdraw(npf_cursor* cursor) noexcept
    {
        std::atomic_ref<uint32_t>(cursor->flags).fetch_and(~uint32_t(NPF_CURSOR_F_SERVED),
                                                           std::memory_order_release);
        detail::storeRelease(cursor->prod, detail::loadAcquire(cursor->cons));
    }

private:
    npf_post* slots_;
    npf_cursor* cursor_;
    uint64_t start_;
    uint64_t prod_;
    uint64_t published_;
    bool served_ = false;
};

} // namespace npf::dataplane
