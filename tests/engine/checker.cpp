#include "checker.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "e2e_rig.h"

namespace npf::e2e {

Checker::Checker(Engine& eng, Flow& flow, BufferPlan plan, std::function<uint32_t(uint32_t)> sizeOf, bool seqIsIndex)
    : eng_(eng), flow_(flow), plan_(std::move(plan)), sizeOf_(std::move(sizeOf)), seqIsIndex_(seqIsIndex)
{
    uint64_t room = (eng_.regionSize() - plan_.base) / plan_.stride;
    if (plan_.slots == 0)
        plan_.slots = room;
    if (plan_.slots > room || plan_.depth > NPF_POST_RING_SIZE || plan_.depth > plan_.slots)
        throw std::invalid_argument("buffer plan does not fit the region or the post ring");
}

void Checker::postInitial()
{
    for (uint32_t i = 0; i < plan_.depth; i++)
        repost();
    flow_.flush();
}

uint32_t Checker::window(uint32_t want) const
{
    // Posts reach XDP in groups of kPostBurst: keep two groups in hand.
    const uint32_t room = plan_.depth > 2 * Flow::kPostBurst ? plan_.depth - 2 * Flow::kPostBurst : 1;
    return std::min(want, room);
}

void Checker::repost()
{
    const uint32_t len = plan_.len(posted_);
    if (!flow_.post(offsetOf(posted_), len))
        throw std::runtime_error("post " + std::to_string(posted_) + " refused: ring full");
    postedLen_.push_back(len);
    posted_++;
}

void Checker::fail(const std::string& msg)
{
    if (t_.failures++ < 12)
        t_.firstFailures += msg + "\n";
}

void Checker::handle(const npf_completion& c)
{
    if (!started_) {
        start_ = c.seq;
        started_ = true;
    }
    const uint64_t p = t_.completions;
    if (c.seq != start_ + p)
        fail("completion " + std::to_string(p) + ": seq " + std::to_string(c.seq) + ", expected " +
             std::to_string(start_ + p));
    if (p < posted_ && c.offset != offsetOf(p))
        fail("seq " + std::to_string(c.seq) + ": offset " + std::to_string(c.offset) + ", posted " +
             std::to_string(offsetOf(p)));
    t_.completions++;
    t_.faultFlag += (c.flags & NPF_CF_FAULT) != 0;
    switch (c.status) {
    case NPF_CS_OK: t_.ok++; break;
    case NPF_CS_TRUNCATED: t_.truncated++; break;
    case NPF_CS_LOST:
    case NPF_CS_BAD_CSUM:
        (c.status == NPF_CS_LOST ? t_.lost : t_.badCsum)++;
        if (c.len != 0)
            fail("seq " + std::to_string(c.seq) + ": status " + std::to_string(c.status) + " with len " +
                 std::to_string(c.len));
        return;
    default: fail("seq " + std::to_string(c.seq) + ": status " + std::to_string(c.status)); return;
    }
    pending_.push_back(c);
}

bool Checker::verify(const npf_completion& c)
{
    const uint8_t* at = eng_.region() + c.offset;
    const uint64_t p = c.seq - start_;
    const uint32_t postedLen = p < postedLen_.size() ? postedLen_[p] : 0;
    uint32_t id, size;
    if (c.len >= kHeader) {
        std::memcpy(&id, at, 4);
        uint16_t s16;
        std::memcpy(&s16, at + 4, 2);
        size = s16;
        if (seqIsIndex_ && id != p) {
            fail("seq " + std::to_string(c.seq) + ": carries datagram " + std::to_string(id) + ", expected " +
                 std::to_string(p));
            return false;
        }
    } else if (seqIsIndex_) {
        id = static_cast<uint32_t>(p);
        size = sizeOf_(id);
    } else {
        fail("seq " + std::to_string(c.seq) + ": " + std::to_string(c.len) + " bytes, too short to identify");
        return false;
    }
    if (size != sizeOf_(id)) {
        fail("seq " + std::to_string(c.seq) + ": header says datagram " + std::to_string(id) + " of " +
             std::to_string(size) + " bytes, it was sent with " + std::to_string(sizeOf_(id)));
        return false;
    }
    if (c.status == NPF_CS_OK && c.len != size)
        fail("seq " + std::to_string(c.seq) + ": OK with len " + std::to_string(c.len) + ", datagram has " +
             std::to_string(size));
    if (c.status == NPF_CS_TRUNCATED && !(c.len == postedLen && size > postedLen))
        fail("seq " + std::to_string(c.seq) + ": TRUNCATED len " + std::to_string(c.len) + ", datagram " +
             std::to_string(size) + ", buffer " + std::to_string(postedLen));
    if (c.status == NPF_CS_OK && size > postedLen)
        fail("seq " + std::to_string(c.seq) + ": OK but datagram " + std::to_string(size) + " > buffer " +
             std::to_string(postedLen));
    if (ids_[id]++)
        fail("datagram " + std::to_string(id) + " completed twice (again at seq " + std::to_string(c.seq) + ")");
    order_.push_back(id);
    for (uint32_t i = 0; i < c.len; i++)
        if (at[i] != payloadByte(id, size, i)) {
            fail("seq " + std::to_string(c.seq) + " datagram " + std::to_string(id) + " (" + std::to_string(size) +
                 " B, flags " + std::to_string(c.flags) + ") at offset " + std::to_string(c.offset) + ": byte " +
                 std::to_string(i) + " is " + std::to_string(at[i]) + ", sent " +
                 std::to_string(payloadByte(id, size, i)));
            return false;
        }
    t_.verified++;
    return true;
}

::testing::AssertionResult Checker::inSendOrder() const
{
    std::unordered_map<uint32_t, uint32_t> last;
    for (size_t i = 0; i < order_.size(); i++) {
        const uint32_t id = order_[i], sid = id >> 24, k = id & 0xffffff;
        auto it = last.find(sid);
        if (it != last.end() && k <= it->second)
            return ::testing::AssertionFailure() << "completion " << i << ": sender " << sid << " datagram " << k
                                                 << " after datagram " << it->second;
        last[sid] = k;
    }
    return ::testing::AssertionSuccess();
}

void Checker::verifyPending(size_t keep)
{
    while (pending_.size() - pendingHead_ > keep)
        verify(pending_[pendingHead_++]);
    if (pendingHead_ > 4096 && pendingHead_ * 2 > pending_.size()) {
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(pendingHead_));
        pendingHead_ = 0;
    }
}

size_t Checker::pumpOnce(std::chrono::milliseconds wait, size_t lag)
{
    // A slot is posted again only after its completion was verified.
    if (plan_.slots < plan_.depth + lag + 1)
        throw std::invalid_argument("buffer plan: slots must exceed depth + lag");
    npf_completion batch[256];
    const int r = wait.count() ? flow_.wait(batch, wait) : flow_.poll(batch);
    const size_t n = r > 0 ? static_cast<size_t>(r) : 0;
    for (size_t i = 0; i < n; i++)
        handle(batch[i]);
    verifyPending(lag);
    for (size_t i = 0; i < n; i++)
        repost();
    if (n) {
        flow_.flush();
        done_.store(t_.completions, std::memory_order_release);
    }
    return n;
}

void Checker::pumpReady(size_t lag) { pumpOnce(std::chrono::milliseconds(0), lag); }

bool Checker::pumpUntil(uint64_t total, size_t lag, std::chrono::milliseconds deadline)
{
    auto last = std::chrono::steady_clock::now();
    while (t_.completions < total) {
        const auto now = std::chrono::steady_clock::now();
        if (pumpOnce(std::chrono::milliseconds(20), lag))
            last = now;
        else if (now - last > deadline)
            break;
    }
    return t_.completions >= total;
}

bool Checker::pumpUntilSettled(const std::function<bool()>& settled, size_t lag, std::chrono::milliseconds deadline)
{
    const auto end = std::chrono::steady_clock::now() + deadline;
    for (;;) {
        if (pumpOnce(std::chrono::milliseconds(20), lag))
            continue;
        if (settled()) {
            pumpReady(lag); // what completed while settled() looked
            return true;
        }
        if (std::chrono::steady_clock::now() > end)
            return false;
    }
}

} // namespace npf::e2e
