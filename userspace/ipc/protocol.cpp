#include "ipc/protocol.h"

#include "ipc/fields.h"
#include "ipc/schema.h"

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <limits>

namespace npf::ipc {
namespace {

struct CodeInfo {
    ErrorCode code;
    std::string_view name;
    int err;
};

constexpr std::array<CodeInfo, 11> kCodes{{
    {ErrorCode::BadMessage, "bad_message", EBADMSG},
    {ErrorCode::BadVersion, "bad_version", EPROTO},
    {ErrorCode::NotAllowed, "not_allowed", EACCES},
    {ErrorCode::Busy, "busy", EBUSY},
    {ErrorCode::NoSpace, "no_space", ENOSPC},
    {ErrorCode::BadFd, "bad_fd", EBADF},
    {ErrorCode::TooLarge, "too_large", EFBIG},
    {ErrorCode::NoRegion, "no_region", ENXIO},
    {ErrorCode::NoFlow, "no_flow", ENOENT},
    {ErrorCode::Internal, "internal", EIO},
    {ErrorCode::ShuttingDown, "shutting_down", ESHUTDOWN},
}};

const CodeInfo& info(ErrorCode c) noexcept
{
    for (const CodeInfo& i : kCodes)
        if (i.code == c)
            return i;
    return kCodes[static_cast<size_t>(ErrorCode::Internal)];
}

} // namespace

std::string describeValue(const Json& v)
{
    switch (v.type()) {
    case Json::value_t::object:
        return "an object";
    case Json::value_t::array:
        return "an array";
    case Json::value_t::number_float:
        return "a non-integer number (" + v.dump() + ")";
    case Json::value_t::number_integer:
        return "a negative number (" + v.dump() + ")";
    default: {
        std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
        return s.size() > 40 ? s.substr(0, 37) + "..." : s;
    }
    }
}

bool isInterfaceName(std::string_view s) noexcept
{
    if (s.empty() || s.size() > kMaxIfname || s == "." || s == "..")
        return false;
    for (unsigned char c : s)
        if (c <= ' ' || c == '/' || c == ':' || c == 0x7f)
            return false;
    return true;
}

std::string_view toString(ErrorCode c) noexcept { return info(c).name; }

std::optional<ErrorCode> parseErrorCode(std::string_view name) noexcept
{
    for (const CodeInfo& i : kCodes)
        if (i.name == name)
            return i.code;
    return std::nullopt;
}

int defaultErrno(ErrorCode c) noexcept { return info(c).err; }

ProtocolError::ProtocolError(ErrorCode code, const std::string& message, int err, uint32_t id)
    : std::runtime_error(message), code_(code), err_(err ? err : defaultErrno(code)), id_(id)
{
}

Message parse(std::string_view bytes)
{
    Json j = Json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded())
        throw ProtocolError(ErrorCode::BadMessage, "message is not JSON");
    if (!j.is_object())
        throw ProtocolError(ErrorCode::BadMessage, "message is " + describeValue(j) + ", not a JSON object");
    Message m;
    auto id = j.find("id");
    if (id == j.end())
        throw ProtocolError(ErrorCode::BadMessage, "message has no \"id\"");
    if (!id->is_number_unsigned() || id->get<uint64_t>() > std::numeric_limits<uint32_t>::max())
        throw ProtocolError(ErrorCode::BadMessage, "message \"id\" must be a uint32, got " + describeValue(*id));
    m.id = static_cast<uint32_t>(id->get<uint64_t>());
    auto type = j.find("type");
    if (type == j.end())
        throw ProtocolError(ErrorCode::BadMessage, "message has no \"type\"", 0, m.id);
    if (!type->is_string() || type->get_ref<const std::string&>().empty() ||
        type->get_ref<const std::string&>().size() > kMaxName)
        throw ProtocolError(ErrorCode::BadMessage,
                            "message \"type\" must be a string of 1.." + std::to_string(kMaxName) +
                                " bytes, got " + describeValue(*type),
                            0, m.id);
    m.type = type->get<std::string>();
    m.body = std::move(j);
    return m;
}

std::string encodeMessage(std::string_view type, uint32_t id, const Json& fields)
{
    if (!fields.is_object())
        throw std::invalid_argument("encodeMessage: fields of a '" + std::string(type) + "' message must be an object");
    Json out = Json::object();
    out["type"] = type;
    out["id"] = id;
    for (const auto& [k, v] : fields.items())
        if (k != "type" && k != "id")
            out[k] = v;
    return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---- the messages' fields ---------------------------------------------

using namespace schema;

namespace {

bool validAddrText(std::string_view s) noexcept { return s.size() <= kMaxAddr && validAddr(std::string(s)); }
bool noControl(std::string_view s) noexcept { return !hasControl(s); }

// The error code by its name: an unknown one (a newer npfd's) reads as internal.
struct CodeField {
    std::string_view key;
    void put(const ErrorReply& m, Json& j) const { j[std::string(key)] = toString(m.code); }
    void get(const Fields& f, ErrorReply& m) const
    {
        m.code = parseErrorCode(f.str(key, kMaxName, true)).value_or(ErrorCode::Internal);
    }
};

// release's optional [[flow, prod], ...].
struct PostedField {
    std::string_view key;
    void put(const ReleaseRequest& m, Json& j) const
    {
        if (m.posted.empty())
            return;
        Json a = Json::array();
        for (const ReleaseRequest::Posted& p : m.posted)
            a.push_back(Json::array({p.flow, p.prod}));
        j[std::string(key)] = std::move(a);
    }
    void get(const Fields& f, ReleaseRequest& m) const
    {
        const Json* a = f.find(key, false);
        if (!a)
            return;
        if (!a->is_array() || a->size() > ReleaseRequest::kMaxPosted)
            f.fail(key, "must be an array of at most " + std::to_string(ReleaseRequest::kMaxPosted) +
                            " [flow, prod] pairs, got " + describeValue(*a));
        for (const Json& e : *a) {
            if (!e.is_array() || e.size() != 2)
                f.fail(key, "each entry must be [flow, prod], got " + describeValue(e));
            m.posted.push_back({static_cast<uint32_t>(f.number(key, e[0], 0, UINT32_MAX)),
                                f.number(key, e[1], 0, UINT64_MAX)});
        }
    }
};

constexpr auto kLimits = fields("hello reply limits", uint("region_bytes", &Limits::regionBytes),
                                uint("resident_bytes", &Limits::residentBytes), uint("flows", &Limits::flows));

} // namespace

constexpr auto schemaOf(Tag<OkReply>) { return fields("ok reply"); }
constexpr auto schemaOf(Tag<ErrorReply>)
{
    return fields("error reply", CodeField{"code"}, uint("errno", &ErrorReply::err),
                  Text<ErrorReply>{"message", &ErrorReply::message, kMaxText});
}
constexpr auto schemaOf(Tag<HelloReply>)
{
    return fields("hello reply", uint("protocol", &HelloReply::protocol), uint("abi", &HelloReply::abi),
                  uint("daemon_pid", &HelloReply::daemonPid, 1, std::numeric_limits<int32_t>::max()),
                  TextList<HelloReply>{"ifaces", &HelloReply::ifaces, 0, kMaxIfaces, kMaxIfname, isInterfaceName,
                                       "is not an interface name"},
                  nested("limits", &HelloReply::limits, kLimits),
                  // From an npfd of before 2026-12, neither: the client falls back to its limits.
                  nested("free", &HelloReply::free, kLimits, When::Optional),
                  MaybeUint<HelloReply>{"default_budget", &HelloReply::defaultBudget},
                  Text<HelloReply>{"delegated", &HelloReply::delegated, kMaxIfname, When::Omitted, isInterfaceName,
                                   "is not an interface name"});
}
constexpr auto schemaOf(Tag<DelegateReply>)
{
    return fields("delegate reply",
                  Text<DelegateReply>{"iface", &DelegateReply::iface, kMaxIfname, When::Required, isInterfaceName,
                                      "is not an interface name"},
                  uint("ifindex", &DelegateReply::ifindex, 1), uint("prog_id", &DelegateReply::progId, 1),
                  uint("queues", &DelegateReply::queues, 1, NPF_MAX_QUEUES),
                  uint("frame_size", &DelegateReply::frameSize, 2048, 4096, When::Required, true),
                  uint("frame_count", &DelegateReply::frameCount, 1, 1u << 20),
                  uint("fill_size", &DelegateReply::fillSize, 1, 1u << 22, When::Required, true),
                  uint("comp_size", &DelegateReply::compSize, 1, 1u << 22, When::Required, true),
                  uint("rx_size", &DelegateReply::rxSize, 1, 1u << 22, When::Required, true),
                  uint("frames_per_packet", &DelegateReply::framesPerPacket, 1, 64),
                  uint("multi_buffer", &DelegateReply::multiBuffer, 0, 1));
}
constexpr auto schemaOf(Tag<QueueReply>) { return fields("queue reply"); }
constexpr auto schemaOf(Tag<DelegateFlowReply>)
{
    return fields("delegate_flow reply", uint("flow", &DelegateFlowReply::flow),
                  uint("gen", &DelegateFlowReply::gen), uint("port", &DelegateFlowReply::port, 1),
                  uint("ring_size", &DelegateFlowReply::ringSize, 1, UINT32_MAX, When::Required, true));
}
constexpr auto schemaOf(Tag<RegionReply>) { return fields("region reply", uint("region", &RegionReply::region)); }
constexpr auto schemaOf(Tag<OpenFlowReply>)
{
    return fields("open_flow reply", uint("flow", &OpenFlowReply::flow), uint("gen", &OpenFlowReply::gen),
                  uint("port", &OpenFlowReply::port, 1),
                  uint("ring_size", &OpenFlowReply::ringSize, 1, UINT32_MAX, When::Required, true),
                  uint("completion_entries", &OpenFlowReply::completionEntries, 2, kMaxCompletionEntries,
                       When::Required, true));
}
constexpr auto schemaOf(Tag<PagesReply>) { return fields("pages reply", uint("pages", &PagesReply::pages)); }
constexpr auto schemaOf(Tag<StatsReply>) { return fields("stats reply", Object<StatsReply>{"stats", &StatsReply::stats}); }
constexpr auto schemaOf(Tag<FlowStatsReply>)
{
    return fields("flow_stats reply", Object<FlowStatsReply>{"stats", &FlowStatsReply::stats});
}

constexpr auto schemaOf(Tag<HelloRequest>)
{
    return fields("hello", uint("protocol", &HelloRequest::protocol), uint("abi", &HelloRequest::abi),
                  Text<HelloRequest>{"name", &HelloRequest::name, kMaxName, When::Omitted, noControl,
                                     "contains control characters"},
                  uint("delegate", &HelloRequest::delegate, 0, 1, When::Omitted));
}
constexpr auto schemaOf(Tag<DelegateRequest>)
{
    return fields("delegate", uint("size", &DelegateRequest::size, 1), uint("budget", &DelegateRequest::budget),
                  uint("page_size", &DelegateRequest::pageSize, 4096, 1u << 30, When::Required, true));
}
constexpr auto schemaOf(Tag<QueueRequest>)
{
    return fields("queue", uint("queue", &QueueRequest::queue, 0, NPF_MAX_QUEUES - 1));
}
constexpr auto schemaOf(Tag<DelegateFlowRequest>)
{
    return fields("delegate_flow", uint("port", &DelegateFlowRequest::port, 1),
                  Text<DelegateFlowRequest>{"addr", &DelegateFlowRequest::addr, kMaxAddr, When::Optional,
                                            validAddrText, "is not an IPv4 or IPv6 address"});
}
constexpr auto schemaOf(Tag<RegionRequest>)
{
    return fields("region", uint("size", &RegionRequest::size, 1), uint("budget", &RegionRequest::budget),
                  uint("base", &RegionRequest::base, 1),
                  uint("page_size", &RegionRequest::pageSize, 4096, 1u << 30, When::Required, true));
}
constexpr auto schemaOf(Tag<OpenFlowRequest>)
{
    return fields("open_flow",
                  Text<OpenFlowRequest>{"iface", &OpenFlowRequest::iface, kMaxIfname, When::Omitted, isInterfaceName,
                                        "is not an interface name"},
                  uint("port", &OpenFlowRequest::port, 1),
                  Text<OpenFlowRequest>{"addr", &OpenFlowRequest::addr, kMaxAddr, When::Optional, validAddrText,
                                        "is not an IPv4 or IPv6 address"},
                  uint("completion_ring", &OpenFlowRequest::completionEntries, 0, kMaxCompletionEntries,
                       When::Omitted),
                  uint("credit_step", &OpenFlowRequest::creditStep, 0, NPF_POST_RING_SIZE, When::Omitted),
                  uint("credit_interval_us", &OpenFlowRequest::creditIntervalUs, 0, 1'000'000, When::Omitted));
}
constexpr auto schemaOf(Tag<CloseFlowRequest>) { return fields("close_flow", uint("flow", &CloseFlowRequest::flow)); }
constexpr auto schemaOf(Tag<ReleaseRequest>)
{
    return fields("release", uint("offset", &ReleaseRequest::offset), uint("len", &ReleaseRequest::len, 1),
                  PostedField{"posted"});
}
constexpr auto schemaOf(Tag<PopulateRequest>)
{
    return fields("populate", uint("offset", &PopulateRequest::offset), uint("len", &PopulateRequest::len, 1));
}
constexpr auto schemaOf(Tag<StatsRequest>) { return fields("stats"); }
constexpr auto schemaOf(Tag<FlowStatsRequest>) { return fields("flow_stats", uint("flow", &FlowStatsRequest::flow)); }
constexpr auto schemaOf(Tag<ByeRequest>) { return fields("bye"); }

// What one field cannot say alone.
// A region's size and budget against its page size (region, delegate).
template <typename R>
void checkRegionSize(const Fields& f, const R& r)
{
    if (r.size % r.pageSize)
        f.fail("size", std::to_string(r.size) + " is not a multiple of page_size " + std::to_string(r.pageSize));
    if (r.budget < r.pageSize)
        f.fail("budget", "must be at least page_size " + std::to_string(r.pageSize) + ", got " +
                             std::to_string(r.budget));
}

void check(const Fields& f, RegionRequest& r)
{
    checkRegionSize(f, r);
    if (r.base % r.pageSize)
        f.fail("base", std::to_string(r.base) + " is not aligned to page_size " + std::to_string(r.pageSize));
    if (r.base + r.size < r.base)
        f.fail("size", "base + size overflows");
}

void check(const Fields& f, DelegateRequest& r) { checkRegionSize(f, r); }

void check(const Fields& f, OpenFlowRequest& r)
{
    if (r.completionEntries && (r.completionEntries < NPF_POST_RING_SIZE || !powerOfTwo(r.completionEntries)))
        f.fail("completion_ring", "must be 0 (default) or a power of two >= " + std::to_string(NPF_POST_RING_SIZE) +
                                      ", got " + std::to_string(r.completionEntries));
}

template <typename R>
void checkRange(const Fields& f, const R& r)
{
    if (r.offset + r.len < r.offset)
        f.fail("len", "offset + len overflows");
}
void check(const Fields& f, ReleaseRequest& r) { checkRange(f, r); }
void check(const Fields& f, PopulateRequest& r) { checkRange(f, r); }

// Each message's encode and decode: its schema's.
NPF_MESSAGE_CODEC(OkReply)
NPF_MESSAGE_CODEC(ErrorReply)
NPF_MESSAGE_CODEC(HelloReply)
NPF_MESSAGE_CODEC(RegionReply)
NPF_MESSAGE_CODEC(OpenFlowReply)
NPF_MESSAGE_CODEC(PagesReply)
NPF_MESSAGE_CODEC(StatsReply)
NPF_MESSAGE_CODEC(FlowStatsReply)
NPF_MESSAGE_CODEC(HelloRequest)
NPF_MESSAGE_CODEC(RegionRequest)
NPF_MESSAGE_CODEC(OpenFlowRequest)
NPF_MESSAGE_CODEC(CloseFlowRequest)
NPF_MESSAGE_CODEC(ReleaseRequest)
NPF_MESSAGE_CODEC(PopulateRequest)
NPF_MESSAGE_CODEC(StatsRequest)
NPF_MESSAGE_CODEC(FlowStatsRequest)
NPF_MESSAGE_CODEC(ByeRequest)
NPF_MESSAGE_CODEC(DelegateReply)
NPF_MESSAGE_CODEC(QueueReply)
NPF_MESSAGE_CODEC(DelegateFlowReply)
NPF_MESSAGE_CODEC(DelegateRequest)
NPF_MESSAGE_CODEC(QueueRequest)
NPF_MESSAGE_CODEC(DelegateFlowRequest)

ErrorReply ErrorReply::from(const ProtocolError& e)
{
    return {e.code(), static_cast<uint32_t>(e.err()), e.what()};
}

uint32_t negotiate(const HelloRequest& h)
{
    const std::string client = "client speaks protocol " + std::to_string(h.protocol);
    const std::string npfd = "npfd speaks protocol " + std::to_string(kOldestProtocol) + " or " +
                             std::to_string(kProtocolVersion);
    if (h.protocol > kProtocolVersion)
        throw ProtocolError(ErrorCode::BadVersion, client + ", " + npfd +
                                                       ": the client is newer than npfd: upgrade npfd (an npfd "
                                                       "serves clients of its release and the one before)");
    if (h.protocol < kOldestProtocol)
        throw ProtocolError(ErrorCode::BadVersion,
                            client + ", " + npfd + ": the client is too old for this npfd: upgrade the client");
    if (h.protocol == 2 && h.abi != kProtocol2Abi)
        throw ProtocolError(ErrorCode::BadVersion,
                            client + " with ABI " + std::to_string(h.abi) + ", " + npfd +
                                " (protocol 2 only with ABI " + std::to_string(kProtocol2Abi) +
                                ", the ring layouts it serves): upgrade the client");
    return h.protocol;
}

HelloReply helloReplyFor(uint32_t protocol)
{
    HelloReply r;
    r.protocol = protocol;
    r.abi = protocol == 2 ? kProtocol2Abi : NPF_ABI_VERSION;
    return r;
}

} // namespace npf::ipc

namespace npf::ipc {

void lastWord(int fd, ErrorCode code, int err, const std::string& why) noexcept
{
    try {
        (void)sendMessage(fd, ErrorReply{code, static_cast<uint32_t>(err), why}.encode(0));
    } catch (const std::exception&) {
    }
    for (int i = 0; i < 16; ++i)
        try {
            if (recvMessage(fd).status != IoStatus::Ok)
                return;
        } catch (const std::exception&) {
        }
}

} // namespace npf::ipc
