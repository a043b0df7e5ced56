// Grace periods for writers of the region (primary workers). A reader enters
// before it checks resident bits and writes, and exits (or quiesces) after its
// batch. The pager clears bits, calls advance() and waits until passed():
// every reader is idle or entered after the advance, so none can still be
// writing a page whose bit it saw set before the clear.
//
// Ordering: the pager clears bits, then advance() (seq_cst); a reader stores
// its epoch, then a seq_cst fence, then loads the bits. Dekker-style, at least
// one side sees the other: the reader sees the cleared bit, or the pager sees
// the reader active with an old epoch and waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace npf {

class EpochDomain {
public:
    static constexpr unsigned kMaxReaders = 128;

    EpochDomain();
    EpochDomain(const EpochDomain&) = delete;
    EpochDomain& operator=(const EpochDomain&) = delete;

    // Claims a reader slot; throws std::system_error(EBUSY) when all are taken.
    unsigned registerReader();
    void unregisterReader(unsigned slot) noexcept;

    void enter(unsigned slot) noexcept
    {
        uint64_t e = global_.load(std::memory_order_acquire);
        slots_[slot].state.store(e, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // Publishes progress without going idle (same as exit + enter).
    void quiesce(unsigned slot) noexcept { enter(slot); }
    void exit(unsigned slot) noexcept { slots_[slot].state.store(0, std::memory_order_release); }

    // Starts a grace period; returns its epoch.
    uint64_t advance() noexcept
    {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return global_.fetch_add(1, std::memory_order_seq_cst) + 1;
    }
    // True once every reader is idle or entered at `epoch` or later.
    bool passed(uint64_t epoch) const noexcept;
    uint64_t current() const noexcept { return global_.load(std::memory_order_acquire); }

    // Grace periods being waited for now (a waiter counts itself in while it
    // waits): a reader that finds one while it is stuck knows it holds a
    // waiter up (Region counts those: fast_path_faults_in_grace).
    void beginWait() noexcept { waiting_.fetch_add(1, std::memory_order_relaxed); }
    void endWait() noexcept { waiting_.fetch_sub(1, std::memory_order_relaxed); }
    bool waited() const noexcept { return waiting_.load(std::memory_order_relaxed) != 0; }

    // RAII slot registration with enter/exit.
    class Reader {
    public:
        explicit Reader(EpochDomain& d) : d_(&d), slot_(d.registerReader()) {}
        Reader(Reader&& o) noexcept : d_(std::exchange(o.d_, nullptr)), slot_(o.slot_) {}
        Reader& operator=(Reader&&) = delete;
        Reader(const Reader&) = delete;
        ~Reader()
        {
            if (d_)
                d_->unregisterReader(slot_);
        }
        void enter() noexcept { d_->enter(slot_); }
        void exit() noexcept { d_->exit(slot_); }
        void quiesce() noexcept { d_->quiesce(slot_); }
        unsigned slot() const noexcept { return slot_; }

    private:
        EpochDomain* d_;
        unsigned slot_;
    };

private:
    struct alignas(64) Slot {
        std::atomic<uint64_t> state{0}; // 0 idle, else the epoch entered
        std::atomic<bool> used{false};
    };
    std::atomic<uint64_t> global_{1};
    std::atomic<uint32_t> waiting_{0};
    std::unique_ptr<Slot[]> slots_;
};

} // namespace npf
