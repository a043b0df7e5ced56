// npf/npf.h's sender: npf::Sender behind a handle.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "capi/error.h"
#include "capi/sized_struct.h"
#include "npf/npf.h"
#include "npf/sender.h"

using npf::capi::fail;
using npf::capi::guarded;

struct npf_sender {
    std::unique_ptr<npf::Sender> s;
    std::vector<std::span<const uint8_t>> batch; // npf_sender_send's, kept between calls
};

int npf_sender_open(const struct npf_sender_opts* opts, npf_sender** out)
{
    return guarded([&] {
        if (!out)
            return fail(EINVAL, "npf_sender_open: out is NULL");
        *out = nullptr;
        npf_sender_opts o;
        if (int rc = npf::capi::readOptions(opts, &o, sizeof(npf_sender_opts), "npf_sender_opts"))
            return rc;
        if (!o.to)
            return fail(EINVAL, "npf_sender_opts.to is NULL");
        if (o.plain > 1)
            return fail(EINVAL, "npf_sender_opts.plain must be 0 or 1, got " + std::to_string(o.plain));
        npf::SenderConfig c{.to = o.to, .port = o.port, .from = o.from ? o.from : "", .fromPort = o.from_port};
        c.credits = !o.plain;
        if (o.initial_window)
            c.initialWindow = o.initial_window;
        if (o.timeout_ms)
            c.timeout = std::chrono::milliseconds(o.timeout_ms);
        c.rate = o.rate;
        auto h = std::make_unique<npf_sender>();
        h->s = std::make_unique<npf::Sender>(c);
        *out = h.release();
        return 0;
    });
}

int64_t npf_sender_send(npf_sender* s, const struct iovec* dgrams, size_t n)
{
    if (!s || (!dgrams && n))
        return fail(EINVAL, std::string("npf_sender_send: ") + (s ? "dgrams" : "sender") + " is NULL");
    int64_t sent = 0;
    const int rc = guarded([&] {
        s->batch.clear();
        for (size_t i = 0; i < n; i++)
            s->batch.emplace_back(static_cast<const uint8_t*>(dgrams[i].iov_base), dgrams[i].iov_len);
        sent = s->s->send(s->batch);
        return sent < 0 ? fail(static_cast<int>(-sent), "npf_sender_send: " +
                                                             std::string(sent == -ETIMEDOUT
                                                                             ? "no credit from the receiver in time"
                                                                             : strerror(static_cast<int>(-sent))))
                        : 0;
    });
    return rc < 0 ? rc : sent;
}

int npf_sender_read_counters(const npf_sender* s, struct npf_sender_counters* out)
{
    if (!s)
        return fail(EINVAL, "npf_sender_read_counters: sender is NULL");
    return guarded([&] {
        const npf::SenderStats st = s->s->stats();
        npf_sender_counters c{};
        c.sent = st.sent, c.credits = st.credits, c.ignored = st.ignored, c.throttled = st.throttled;
        c.waited_ns = st.waitedNs, c.rebased = st.rebased, c.resynced = st.resynced, c.limit = st.limit;
        c.received = st.received, c.last_hint_us = st.lastHintUs;
        return npf::capi::writeCounters(c, out, sizeof(npf_sender_counters), "npf_sender_counters");
    });
}

int npf_sender_fd(const npf_sender* s)
{
    if (!s)
        return fail(EINVAL, "npf_sender_fd: sender is NULL");
    return s->s->fd();
}

void npf_sender_close(npf_sender* s)
{
    npf::capi::KeepErrno keep;
    delete s;
}
