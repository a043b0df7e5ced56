// The npfd protocol's messages: one JSON object per SOCK_SEQPACKET message,
// typed request and reply structs with encode() and a strict decode(), and
// the error codes. docs/protocol.md is the reference; this file is its code.
// Each message's JSON fields (key, member, bounds) are listed once, in
// protocol.cpp's schemaOf(): encode() and decode() both come from that list
// (schema.h).
//
// Every message has "type" (string) and "id" (uint32, chosen by the client,
// echoed in the reply). Every request gets exactly one reply, of type "ok"
// (the struct named <Request>::Reply) or "error" (ErrorReply).
//
// decode() is strict about what it reads and lenient about what it does not:
// a missing or mistyped required field, a number that is negative, a float,
// or out of range, a string that is too long, all throw ProtocolError
// (ErrorCode::BadMessage) naming the message and the field; fields it does
// not know are ignored (a newer peer may send more); null reads as absent
// for an optional field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/unix_socket.h" // kMaxMessage, kMaxFds
#include "npf/abi.h"

namespace npf::ipc {

// Key order is kept ("type" and "id" first), so messages read well in logs.
using Json = nlohmann::ordered_json;

// The version of all that crosses the process boundary between npfd and a
// client: the messages and the descriptors they carry (this file) and the
// layouts of the rings the client maps (NPF_RING_LAYOUT_VERSION, abi.h).
// Not the library's own interface (NPF_ABI_VERSION), which a client's and
// npfd's builds need not share. An incompatible change to any of them bumps
// it; new optional fields, replies' new fields, new request types and new
// error codes do not (docs/protocol.md, "Versioning").
//  2: the completion notifier is a pipe's read end (was an eventfd, whose
//     flags a client shared with npfd).
//  3: the hello's "abi" is the client library's, for npfd's log; the
//     protocol alone decides (2 required npfd's own NPF_ABI_VERSION there).
inline constexpr uint32_t kProtocolVersion = 3;
// The oldest protocol npfd serves: the one before, so that upgrading npfd
// first and its clients after breaks no client (each is spoken to in its
// own version; the versions differ only in the hello).
inline constexpr uint32_t kOldestProtocol = 2;
// Protocol 2 named the ring layouts by the "abi" of its hello: npfd serves
// the protocol 2 clients whose layouts are its own, those of ABI 5.
inline constexpr uint32_t kProtocol2Abi = 5;
static_assert(kOldestProtocol > 2 || kProtocol2Abi == NPF_RING_LAYOUT_VERSION,
              "protocol 2 clients map ABI 5's rings: serve them the old layouts, or stop serving protocol 2");

// Bounds decode() enforces (bytes).
inline constexpr size_t kMaxName = 64;     // hello "name"
inline constexpr size_t kMaxIfname = 15;   // IFNAMSIZ - 1
inline constexpr size_t kMaxAddr = 45;     // INET6_ADDRSTRLEN - 1
inline constexpr size_t kMaxText = 4096;   // error "message"
inline constexpr size_t kMaxIfaces = 64;   // hello reply "ifaces"
// open_flow "completion_ring": 0 (daemon default) or a power of two in
// [NPF_POST_RING_SIZE, kMaxCompletionEntries].
inline constexpr uint32_t kMaxCompletionEntries = 1u << 20;

enum class ErrorCode {
    BadMessage,   // bad_message: not JSON, not an object, missing or mistyped field, hello not first
    BadVersion,   // bad_version: protocol or ABI version differs
    NotAllowed,   // not_allowed: the client's rule refuses it (no rule, port, address)
    Busy,         // busy: the port is held by another client
    NoSpace,      // no_space: flows, regions or other limits exhausted
    BadFd,        // bad_fd: descriptors missing, too many, or of the wrong type
    TooLarge,     // too_large: region or budget above the client's limit
    NoRegion,     // no_region: a flow, release or populate before the region
    NoFlow,       // no_flow: no such flow on this connection
    Internal,     // internal: the daemon failed (errno says how)
    ShuttingDown, // shutting_down: the daemon is stopping
};

// "bad_message", ...; parseErrorCode returns nullopt for an unknown name.
std::string_view toString(ErrorCode c) noexcept;
std::optional<ErrorCode> parseErrorCode(std::string_view name) noexcept;
// The errno an error reply carries unless the daemon has a better one:
// EBADMSG, EPROTO, EACCES, EBUSY, ENOSPC, EBADF, EFBIG, ENXIO, ENOENT, EIO, ESHUTDOWN.
int defaultErrno(ErrorCode c) noexcept;

// A message that breaks the protocol (thrown by parse and decode), or a
// request the daemon refuses (thrown by its handlers; ErrorReply::from turns
// it into the reply). what() is the human message.
class ProtocolError : public std::runtime_error {
public:
    // err 0 = defaultErrno(code). id: the request's id when known (parse
    // reads it before anything else can fail), else 0.
    ProtocolError(ErrorCode code, const std::string& message, int err = 0, uint32_t id = 0);
    ErrorCode code() const noexcept { return code_; }
    int err() const noexcept { return err_; }
    uint32_t id() const noexcept { return id_; }

private:
    ErrorCode code_;
    int err_;
    uint32_t id_;
};

// One received message: its type, id and the whole object (fields included).
struct Message {
    std::string type;
    uint32_t id = 0;
    Json body;
};

// Parses one message: JSON, an object, "id" a uint32 and "type" a string.
// Throws ProtocolError(BadMessage); its id() is the message's id if that
// much could be read.
Message parse(std::string_view bytes);

// {"type": type, "id": id, ...fields} as bytes. fields must be an object.
std::string encodeMessage(std::string_view type, uint32_t id, const Json& fields);

// npfd's last word on a connection it is about to close: an error with id 0
// (the client's Channel takes it as the answer to whatever it sent), then
// what the client sent is read and dropped: a connection closed with unread
// data makes the client's next recv() fail with ECONNRESET before it gets to
// the error (which stays queued: Channel reads on).
void lastWord(int fd, ErrorCode code, int err, const std::string& why) noexcept;

// Shared with the config parser: a value as error messages show it (scalars
// as JSON, shortened; containers by kind, never dumped), and the interface
// name rule (1..kMaxIfname bytes, no '/', ':', whitespace or control).
std::string describeValue(const Json& v);
bool isInterfaceName(std::string_view s) noexcept;

// ---- replies ----------------------------------------------------------

// {"type":"ok"} with no fields: the reply to close_flow and bye.
struct OkReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    std::string encode(uint32_t id) const;
    static OkReply decode(const Message& m);
};

// {"type":"error","code":"<ErrorCode>","errno":E,"message":"..."}. An error
// code this version does not know decodes as Internal.
struct ErrorReply {
    static constexpr std::string_view kType = "error";
    static constexpr size_t kFds = 0;
    ErrorCode code = ErrorCode::Internal;
    uint32_t err = 0; // errno
    std::string message;

    static ErrorReply from(const ProtocolError& e);
    std::string encode(uint32_t id) const;
    static ErrorReply decode(const Message& m);
};

// What the client's rule allows it (hello reply "limits").
struct Limits {
    uint64_t regionBytes = 0;   // "region_bytes": largest region
    uint64_t residentBytes = 0; // "resident_bytes": largest budget
    uint32_t flows = 0;         // "flows": flows open at once
};

struct HelloReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    uint32_t protocol = kProtocolVersion;
    uint32_t abi = NPF_ABI_VERSION;
    uint32_t daemonPid = 0;          // "daemon_pid"
    std::vector<std::string> ifaces; // interfaces npfd serves
    Limits limits;
    Limits free;                     // "free": what the rule's totals leave now (absent: npfd before 2026-12)
    // "default_budget": a region's budget when its client asks none (0: the
    // rule has none free); nullopt from an npfd before 2026-12.
    std::optional<uint64_t> defaultBudget;
    // "delegated": the interface whose data path npfd hands this client
    // (it offered to run it, HelloRequest::delegate), "" = brokered mode.
    std::string delegated;
    std::string encode(uint32_t id) const;
    static HelloReply decode(const Message& m);
};

// The data path of the delegated interface, as npfd bound it (delegate's
// reply): the program, and the geometry of every queue's sockets. fds: the
// region's resident bitmap (a BPF array map the client maps and writes; XDP
// reads it).
struct DelegateReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 1;
    std::string iface;
    uint32_t ifindex = 0;
    uint32_t progId = 0;          // "prog_id"
    uint32_t queues = 0;          // "queues": queue q's sockets come with queue {q}
    uint32_t frameSize = 0;       // "frame_size"
    uint32_t frameCount = 0;      // "frame_count"
    uint32_t fillSize = 0;        // "fill_size"
    uint32_t compSize = 0;        // "comp_size"
    uint32_t rxSize = 0;          // "rx_size": each socket's RX ring
    uint32_t framesPerPacket = 0; // "frames_per_packet": of the largest packet
    uint32_t multiBuffer = 0;     // "multi_buffer": 1 if bound with XDP_USE_SG
    std::string encode(uint32_t id) const;
    static DelegateReply decode(const Message& m);
};

// fds, in order: the UMEM's memfd (sealed: map it read-only), the primary
// socket (the UMEM is registered on it), the backup socket.
struct QueueReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 3;
    std::string encode(uint32_t id) const;
    static QueueReply decode(const Message& m);
};

// fds: the flow's post ring (BPF map; the client posts, XDP consumes).
struct DelegateFlowReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 1;
    uint32_t flow = 0;
    uint32_t gen = 0;
    uint16_t port = 0;
    uint32_t ringSize = NPF_POST_RING_SIZE; // "ring_size": post ring entries
    std::string encode(uint32_t id) const;
    static DelegateFlowReply decode(const Message& m);
};

struct RegionReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    uint32_t region = 0;
    std::string encode(uint32_t id) const;
    static RegionReply decode(const Message& m);
};

// fds, in order: the flow's post ring (BPF map), the completion ring
// (memfd), the completion notifier (a pipe's read end; npfd keeps the write end).
struct OpenFlowReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 3;
    uint32_t flow = 0;
    uint32_t gen = 0;
    uint16_t port = 0;
    uint32_t ringSize = NPF_POST_RING_SIZE; // "ring_size": post ring entries
    uint32_t completionEntries = 0;         // "completion_entries"
    std::string encode(uint32_t id) const;
    static OpenFlowReply decode(const Message& m);
};

// The reply to release and populate.
struct PagesReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    uint64_t pages = 0;
    std::string encode(uint32_t id) const;
    static PagesReply decode(const Message& m);
};

struct StatsReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    Json stats = Json::object(); // the engine's stats object
    std::string encode(uint32_t id) const;
    static StatsReply decode(const Message& m);
};

// The reply to flow_stats: the flow's accounting as counters::flowStatsJson
// writes it (npf::Client reads it with counters::parseFlowStats, strictly).
struct FlowStatsReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    Json stats = Json::object();
    std::string encode(uint32_t id) const;
    static FlowStatsReply decode(const Message& m);
};

// ---- requests ---------------------------------------------------------
// kFds is the number of descriptors the request carries.

// The first request of every connection.
struct HelloRequest {
    static constexpr std::string_view kType = "hello";
    static constexpr size_t kFds = 0;
    using Reply = HelloReply;
    uint32_t protocol = kProtocolVersion;
    uint32_t abi = NPF_ABI_VERSION;
    std::string name; // optional, <= kMaxName bytes, no control characters
    // "delegate": 1 = the client can run the data path of an interface npfd
    // delegates (docs/protocol.md, "Delegated mode"); omitted = 0.
    uint32_t delegate = 0;
    std::string encode(uint32_t id) const;
    static HelloRequest decode(const Message& m);
};

// The protocol npfd speaks with the client whose hello is `h`: its own,
// h.protocol, when npfd serves that one (kOldestProtocol..kProtocolVersion;
// protocol 2 only with "abi" kProtocol2Abi). Otherwise throws
// ProtocolError(BadVersion) naming both sides' versions and which to upgrade.
uint32_t negotiate(const HelloRequest& h);

// The hello reply npfd sends in `protocol` (what negotiate returned): that
// protocol, and in "abi" what the client compares there (protocol 2: the
// ring layouts, kProtocol2Abi; 3 on: npfd's NPF_ABI_VERSION, for its log).
HelloReply helloReplyFor(uint32_t protocol);

// fds, in order: the region's memfd, the userfaultfd it is registered with,
// optionally the client's spill file (npfd saves evicted content there,
// so it survives npfd), and after it, optionally, the install area of a
// 2 MiB region (npf_install_ctl: the client's thread allocates its huge
// pages). kFds counts the two that must be there.
struct RegionRequest {
    static constexpr std::string_view kType = "region";
    static constexpr size_t kFds = 2;
    using Reply = RegionReply;
    uint64_t size = 0;        // > 0, a multiple of pageSize
    uint64_t budget = 0;      // resident bytes, >= pageSize
    uint64_t base = 0;        // the client's mapping address, != 0, page aligned
    uint32_t pageSize = 4096; // "page_size": a power of two, 4 KiB .. 1 GiB
    std::string encode(uint32_t id) const;
    static RegionRequest decode(const Message& m);
};

struct OpenFlowRequest {
    static constexpr std::string_view kType = "open_flow";
    static constexpr size_t kFds = 0;
    using Reply = OpenFlowReply;
    std::string iface;               // "" = the daemon's only interface
    uint16_t port = 0;               // 1..65535
    std::string addr;                // "" = any, else IPv4 or IPv6 text
    uint32_t completionEntries = 0;  // "completion_ring": 0 = daemon default
    // Credits to the flow's sender (npf::CreditConfig): "credit_step" 0 =
    // none, else the step; "credit_interval_us" 0 = the default.
    uint32_t creditStep = 0;
    uint32_t creditIntervalUs = 0;
    std::string encode(uint32_t id) const;
    static OpenFlowRequest decode(const Message& m);
};

struct CloseFlowRequest {
    static constexpr std::string_view kType = "close_flow";
    static constexpr size_t kFds = 0;
    using Reply = OkReply;
    uint32_t flow = 0;
    std::string encode(uint32_t id) const;
    static CloseFlowRequest decode(const Message& m);
};

// [offset, offset + len) of the region: len > 0, no overflow.
struct ReleaseRequest {
    static constexpr std::string_view kType = "release";
    static constexpr size_t kFds = 0;
    using Reply = PagesReply;
    uint64_t offset = 0;
    uint64_t len = 0;
    // Optional: for each flow of the client, its post ring's published prod
    // when the client released ({flow id, prod}). npfd applies a release
    // later than it was made; it leaves out the pages of every buffer posted
    // since, which the release must not discard.
    struct Posted {
        uint32_t flow = 0;
        uint64_t prod = 0;
        bool operator==(const Posted&) const = default;
    };
    static constexpr size_t kMaxPosted = 1024;
    std::vector<Posted> posted;
    std::string encode(uint32_t id) const;
    static ReleaseRequest decode(const Message& m);
};

struct PopulateRequest {
    static constexpr std::string_view kType = "populate";
    static constexpr size_t kFds = 0;
    using Reply = PagesReply;
    uint64_t offset = 0;
    uint64_t len = 0;
    std::string encode(uint32_t id) const;
    static PopulateRequest decode(const Message& m);
};

struct StatsRequest {
    static constexpr std::string_view kType = "stats";
    static constexpr size_t kFds = 0;
    using Reply = StatsReply;
    std::string encode(uint32_t id) const;
    static StatsRequest decode(const Message& m);
};

// One of this connection's open flows (its id, as in open_flow's reply):
// every datagram of it accounted (npf::FlowStats). Another flow id (closed,
// never this connection's, another client's) is no_flow.
struct FlowStatsRequest {
    static constexpr std::string_view kType = "flow_stats";
    static constexpr size_t kFds = 0;
    using Reply = FlowStatsReply;
    uint32_t flow = 0;
    std::string encode(uint32_t id) const;
    static FlowStatsRequest decode(const Message& m);
};

// Delegated mode, instead of region: the client's region lives in its own
// memory; npfd charges its size and budget to the client's rule as a
// region's, makes its resident bitmap and says how the interface's
// sockets are bound. Only after a hello reply with "delegated".
struct DelegateRequest {
    static constexpr std::string_view kType = "delegate";
    static constexpr size_t kFds = 0;
    using Reply = DelegateReply;
    uint64_t size = 0;        // > 0, a multiple of pageSize
    uint64_t budget = 0;      // resident bytes, >= pageSize
    uint32_t pageSize = 4096; // "page_size"
    std::string encode(uint32_t id) const;
    static DelegateRequest decode(const Message& m);
};

// Delegated mode: queue q's sockets (QueueReply), after delegate.
struct QueueRequest {
    static constexpr std::string_view kType = "queue";
    static constexpr size_t kFds = 0;
    using Reply = QueueReply;
    uint32_t queue = 0;
    std::string encode(uint32_t id) const;
    static QueueRequest decode(const Message& m);
};

// Delegated mode's open_flow: npfd adds the flow's entry bound to the
// region's bitmap; the client serves it. close_flow and flow_stats as for
// open_flow's flows (flow_stats: XDP's counts alone; the rest are the
// client's).
struct DelegateFlowRequest {
    static constexpr std::string_view kType = "delegate_flow";
    static constexpr size_t kFds = 0;
    using Reply = DelegateFlowReply;
    uint16_t port = 0;  // 1..65535
    std::string addr;   // "" = any, else IPv4 or IPv6 text
    std::string encode(uint32_t id) const;
    static DelegateFlowRequest decode(const Message& m);
};

// The daemon replies ok, then closes the connection.
struct ByeRequest {
    static constexpr std::string_view kType = "bye";
    static constexpr size_t kFds = 0;
    using Reply = OkReply;
    std::string encode(uint32_t id) const;
    static ByeRequest decode(const Message& m);
};

} // namespace npf::ipc
