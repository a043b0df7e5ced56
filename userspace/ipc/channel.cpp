#include "ipc/channel.h"

#include <poll.h>

#include <cerrno>

#include "sys/error.h"

namespace npf::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until fd is ready for `events` or the deadline passes; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline)
{
    for (;;) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0)
            return false;
        pollfd p{fd, events, 0};
        int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
        if (rc > 0)
            return true; // readable, writable, or POLLHUP/POLLERR: the next call says which
        if (rc < 0 && errno != EINTR)
            throwErrno("poll on the npfd socket");
    }
}

[[noreturn]] void closed(std::string_view type)
{
    throw Error(ECONNRESET, "npfd closed the connection (request '" + std::string(type) +
                                "'): the daemon is gone; its flows and region went with it");
}

} // namespace

RemoteError::RemoteError(std::string_view request, ErrorReply reply)
    : std::runtime_error("npfd refused " + std::string(request) + ": " + std::string(toString(reply.code)) + ": " +
                         reply.message),
      reply_(std::move(reply))
{
}

Channel::Channel(Fd socket) : fd_(std::move(socket))
{
    setNonBlocking(fd_.get(), true);
}

Channel Channel::connect(const std::string& path) { return Channel(connectSocket(path)); }

uint32_t Channel::nextId() noexcept
{
    if (++id_ == 0)
        id_ = 1;
    return id_;
}

void Channel::checkFds(std::string_view type, size_t got, size_t want)
{
    if (got != want)
        throw ProtocolError(ErrorCode::BadFd, "npfd sent " + std::to_string(got) + " descriptors with the " +
                                                  std::string(type) + " reply, expected " + std::to_string(want));
}

Channel::Reply Channel::request(const Json& request, std::span<const int> fds, Timeout timeout)
{
    auto type = request.is_object() ? request.find("type") : request.end();
    if (type == request.end() || !type->is_string())
        throw std::invalid_argument("Channel::request: the request must be an object with a \"type\" string");
    const std::string t = type->get<std::string>();
    const uint32_t id = nextId();
    return exchange(t, id, encodeMessage(t, id, request), fds, timeout);
}

void Channel::sendOnly(std::string_view type, const std::string& bytes)
{
    const Clock::time_point deadline = Clock::now() + kDefaultTimeout;
    for (;;) {
        IoStatus s = sendMessage(fd_.get(), bytes, {});
        if (s == IoStatus::Ok)
            return;
        if (s == IoStatus::Eof)
            refusedOrClosed(type);
        if (!waitFor(fd_.get(), POLLOUT, deadline))
            throw Error(ETIMEDOUT, "npfd did not take '" + std::string(type) + "' within " +
                                       std::to_string(kDefaultTimeout.count()) + " ms");
    }
}

void Channel::refusedOrClosed(std::string_view type)
{
    // npfd refuses a connection it cannot admit (a limit, a client no rule
    // admits, no hello in time) with an error of id 0 and closes it: the
    // error may wait to be read although the send failed, behind the
    // ECONNRESET the kernel reports first when npfd closed with our request
    // unread (the error stays queued).
    for (int tries = 0; tries < 2; ++tries) {
        try {
            RecvResult r = recvMessage(fd_.get());
            if (r.status == IoStatus::Ok) {
                Message m = parse(r.message.bytes);
                if (m.type == ErrorReply::kType && m.id == 0)
                    throw RemoteError(type, ErrorReply::decode(m));
            }
            if (r.status == IoStatus::WouldBlock)
                break;
        } catch (const ProtocolError&) {
        } catch (const std::system_error&) {
        }
    }
    closed(type);
}

void Channel::drain()
{
    for (;;) {
        RecvResult r = recvMessage(fd_.get());
        if (r.status == IoStatus::Eof)
            closed("a request");
        if (r.status == IoStatus::WouldBlock)
            return;
        if (unanswered_)
            unanswered_--;
    }
}

Channel::Reply Channel::exchange(std::string_view type, uint32_t id, const std::string& bytes,
                                 std::span<const int> fds, Timeout timeout)
{
    const Clock::time_point deadline = Clock::now() + timeout;
    auto timedOut = [&] {
        throw Error(ETIMEDOUT, "npfd did not reply to '" + std::string(type) + "' within " +
                                   std::to_string(timeout.count()) + " ms");
    };

    for (;;) {
        IoStatus s = sendMessage(fd_.get(), bytes, fds);
        if (s == IoStatus::Ok)
            break;
        if (s == IoStatus::Eof)
            refusedOrClosed(type);
        if (!waitFor(fd_.get(), POLLOUT, deadline))
            timedOut();
    }

    for (;;) {
        RecvResult r = recvMessage(fd_.get());
        if (r.status == IoStatus::Eof)
            refusedOrClosed(type);
        if (r.status == IoStatus::WouldBlock) {
            if (!waitFor(fd_.get(), POLLIN, deadline))
                timedOut();
            continue;
        }
        Message m = parse(r.message.bytes);
        if (m.type == ErrorReply::kType && (m.id == id || m.id == 0))
            throw RemoteError(type, ErrorReply::decode(m));
        if (m.id != id) {
            if (unanswered_)
                unanswered_--;
            continue; // a send()'s reply, or the late reply to a request that timed out; its fds close here
        }
        unanswered_ = 0; // replies come in order: every earlier one came first
        if (m.type != OkReply::kType)
            throw ProtocolError(ErrorCode::BadMessage, "npfd replied to '" + std::string(type) +
                                                           "' with type '" + m.type + "'", 0, id);
        return {std::move(m), std::move(r.message.fds)};
    }
}

} // namespace npf::ipc
