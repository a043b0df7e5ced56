// The client's side of a connection to npfd: one request at a time, each
// answered by one reply with the same id. Blocking, with a deadline per
// request; the socket itself is non-blocking (poll() waits).
//
//   Channel ch = Channel::connect("/run/npf/npfd.sock");
//   auto hello = ch.call(HelloRequest{.name = "myapp"});
//   int fds[] = {memfd, uffd};
//   auto region = ch.call(RegionRequest{size, budget, base, 4096}, fds);
//   auto flow = ch.call(OpenFlowRequest{.port = 9000});
//   // flow.fds: post ring map, completion memfd, eventfd (OpenFlowReply)
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ipc/protocol.h"
#include "sys/fd.h"

namespace npf::ipc {

// npfd answered a request with an error reply. what() is
// "npfd refused <request type>: <code>: <message>".
class RemoteError : public std::runtime_error {
public:
    RemoteError(std::string_view request, ErrorReply reply);
    ErrorCode code() const noexcept { return reply_.code; }
    int err() const noexcept { return static_cast<int>(reply_.err); }
    const std::string& message() const noexcept { return reply_.message; }

private:
    ErrorReply reply_;
};

class Channel {
public:
    using Timeout = std::chrono::milliseconds;
    static constexpr Timeout kDefaultTimeout{10000};

    // Takes a connected SOCK_SEQPACKET socket and makes it non-blocking.
    explicit Channel(Fd socket);
    // connectSocket(path), then the above.
    static Channel connect(const std::string& path);

    struct Reply {
        Message message;      // type "ok"
        std::vector<Fd> fds;  // what came with the reply, in order
    };
    template <typename R>
    struct Typed {
        R reply;
        std::vector<Fd> fds;
    };

    // Sends `request` (an object with "type"; its "id" is set here) with
    // `fds`, and waits up to `timeout` for the reply with the same id; replies
    // to earlier requests that timed out are skipped (their fds closed).
    // Throws:
    //   RemoteError       an error reply (also one with id 0: npfd could not
    //                     read the request's id);
    //   ProtocolError     a reply that is not a protocol message;
    //   std::system_error ECONNRESET "npfd closed the connection ...",
    //                     ETIMEDOUT "npfd did not reply to ... within N ms",
    //                     or the socket's error.
    Reply request(const Json& request, std::span<const int> fds = {}, Timeout timeout = kDefaultTimeout);

    // request() with a typed request, decoding the typed reply strictly;
    // a reply with other than Req::Reply::kFds descriptors throws
    // ProtocolError(BadFd).
    template <typename Req>
    Typed<typename Req::Reply> call(const Req& req, std::span<const int> fds = {}, Timeout timeout = kDefaultTimeout)
    {
        using R = typename Req::Reply;
        const uint32_t id = nextId();
        Reply r = exchange(Req::kType, id, req.encode(id), fds, timeout);
        checkFds(Req::kType, r.fds.size(), R::kFds);
        return {R::decode(r.message), std::move(r.fds)};
    }

    // Sends a request without waiting for its reply (a hint whose outcome
    // the client does not need, such as release): the reply is taken, and
    // dropped, by a later drain() or call(). Takes the replies already there
    // first. Every kMaxUnanswered-th request in a row whose reply has not
    // come is sent as a call instead: its reply comes after all the earlier
    // ones, so replies never pile up in npfd's way (npfd disconnects a client
    // whose replies it cannot send) while this side sends a burst and then
    // sleeps. Throws as request() does when npfd has gone.
    static constexpr uint32_t kMaxUnanswered = 32;
    template <typename Req>
    void send(const Req& req)
    {
        drain();
        const uint32_t id = nextId();
        if (unanswered_ + 1 >= kMaxUnanswered) {
            try {
                (void)exchange(Req::kType, id, req.encode(id), {}, kDefaultTimeout);
            } catch (const RemoteError&) {
                // npfd's answer to a hint, dropped as drain() drops it
            }
            return;
        }
        sendOnly(Req::kType, req.encode(id));
        unanswered_++;
    }
    // Takes every reply that has arrived, without waiting; drops them.
    void drain();

    int fd() const noexcept { return fd_.get(); }
    // The id of the last request sent (ids start at 1 and skip 0 on wrap).
    uint32_t lastId() const noexcept { return id_; }

private:
    uint32_t nextId() noexcept;
    Reply exchange(std::string_view type, uint32_t id, const std::string& bytes, std::span<const int> fds,
                   Timeout timeout);
    static void checkFds(std::string_view type, size_t got, size_t want);
    void sendOnly(std::string_view type, const std::string& bytes);
    // The send found the connection closed: throws npfd's refusal if one
    // waits to be read, else "npfd closed the connection".
    [[noreturn]] void refusedOrClosed(std::string_view type);

    Fd fd_;
    uint32_t id_ = 0;
    uint32_t unanswered_ = 0; // send()s whose reply has not been taken yet
};

} // namespace npf::ipc
