#include "ipc/protocol.h"

#include "ipc/fields.h"

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

// The fields of a nested object, read with the same rules.
Message nested(const Message& m, const Json& body)
{
    return Message{m.type, m.id, body};
}

std::string encodeOk(uint32_t id, const Json& fields) { return encodeMessage("ok", id, fields); }

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

// ---- replies ----------------------------------------------------------

std::string OkReply::encode(uint32_t id) const { return encodeOk(id, Json::object()); }

OkReply OkReply::decode(const Message& m)
{
    expectType(m, kType, "ok reply");
    return {};
}

ErrorReply ErrorReply::from(const ProtocolError& e)
{
    return {e.code(), static_cast<uint32_t>(e.err()), e.what()};
}

std::string ErrorReply::encode(uint32_t id) const
{
    return encodeMessage(kType, id, {{"code", toString(code)}, {"errno", err}, {"message", message}});
}

ErrorReply ErrorReply::decode(const Message& m)
{
    Fields f(m, kType, "error reply");
    ErrorReply r;
    std::string name = f.str("code", kMaxName, true);
    r.code = parseErrorCode(name).value_or(ErrorCode::Internal);
    r.err = f.u32("errno");
    r.message = f.str("message", kMaxText, true);
    return r;
}

namespace {

Json limitsJson(const Limits& l)
{
    return {{"region_bytes", l.regionBytes}, {"resident_bytes", l.residentBytes}, {"flows", l.flows}};
}

Limits decodeLimits(const Message& m, const Json& body, std::string_view what)
{
    Message lm = nested(m, body);
    Fields f(lm, HelloReply::kType, what);
    return {f.u64("region_bytes"), f.u64("resident_bytes"), f.u32("flows")};
}

} // namespace

std::string HelloReply::encode(uint32_t id) const
{
    Json j = {{"protocol", protocol},   {"abi", abi}, {"daemon_pid", daemonPid},
              {"ifaces", ifaces},       {"limits", limitsJson(limits)}, {"free", limitsJson(free)}};
    if (defaultBudget)
        j["default_budget"] = *defaultBudget;
    return encodeOk(id, j);
}

HelloReply HelloReply::decode(const Message& m)
{
    Fields f(m, kType, "hello reply");
    HelloReply r;
    r.protocol = f.u32("protocol");
    r.abi = f.u32("abi");
    r.daemonPid = f.u32("daemon_pid", 1, std::numeric_limits<int32_t>::max());
    const Json& ifaces = f.array("ifaces");
    if (ifaces.size() > kMaxIfaces)
        f.fail("ifaces", "more than " + std::to_string(kMaxIfaces) + " interfaces");
    for (const Json& i : ifaces) {
        std::string name = f.text("ifaces", i, kMaxIfname);
        if (!isInterfaceName(name))
            f.fail("ifaces", "'" + name + "' is not an interface name");
        r.ifaces.push_back(std::move(name));
    }
    r.limits = decodeLimits(m, f.object("limits"), "hello reply limits");
    // From an npfd of before 2026-12, neither: the client falls back to its limits.
    if (f.find("free", false))
        r.free = decodeLimits(m, f.object("free"), "hello reply free");
    r.defaultBudget = f.optU64("default_budget", 0, std::numeric_limits<uint64_t>::max());
    return r;
}

std::string RegionReply::encode(uint32_t id) const { return encodeOk(id, {{"region", region}}); }

RegionReply RegionReply::decode(const Message& m)
{
    Fields f(m, kType, "region reply");
    return {f.u32("region")};
}

std::string OpenFlowReply::encode(uint32_t id) const
{
    return encodeOk(id, {{"flow", flow},
                         {"gen", gen},
                         {"port", port},
                         {"ring_size", ringSize},
                         {"completion_entries", completionEntries}});
}

OpenFlowReply OpenFlowReply::decode(const Message& m)
{
    Fields f(m, kType, "open_flow reply");
    OpenFlowReply r;
    r.flow = f.u32("flow");
    r.gen = f.u32("gen");
    r.port = static_cast<uint16_t>(f.u32("port", 1, 65535));
    r.ringSize = f.u32("ring_size", 1);
    if (!powerOfTwo(r.ringSize))
        f.fail("ring_size", "must be a power of two, got " + std::to_string(r.ringSize));
    r.completionEntries = f.u32("completion_entries", 2, kMaxCompletionEntries);
    if (!powerOfTwo(r.completionEntries))
        f.fail("completion_entries", "must be a power of two, got " + std::to_string(r.completionEntries));
    return r;
}

std::string PagesReply::encode(uint32_t id) const { return encodeOk(id, {{"pages", pages}}); }

PagesReply PagesReply::decode(const Message& m)
{
    Fields f(m, kType, "pages reply");
    return {f.u64("pages")};
}

std::string StatsReply::encode(uint32_t id) const { return encodeOk(id, {{"stats", stats}}); }

StatsReply StatsReply::decode(const Message& m)
{
    Fields f(m, kType, "stats reply");
    return {f.object("stats")};
}

std::string FlowStatsReply::encode(uint32_t id) const { return encodeOk(id, {{"stats", stats}}); }

FlowStatsReply FlowStatsReply::decode(const Message& m)
{
    Fields f(m, kType, "flow_stats reply");
    return {f.object("stats")};
}

// ---- requests ---------------------------------------------------------

std::string HelloRequest::encode(uint32_t id) const
{
    Json j = {{"protocol", protocol}, {"abi", abi}};
    if (!name.empty())
        j["name"] = name;
    return encodeMessage(kType, id, j);
}

HelloRequest HelloRequest::decode(const Message& m)
{
    Fields f(m, kType, "hello");
    HelloRequest r;
    r.protocol = f.u32("protocol");
    r.abi = f.u32("abi");
    r.name = f.str("name", kMaxName, false);
    if (hasControl(r.name))
        f.fail("name", "contains control characters");
    return r;
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

std::string RegionRequest::encode(uint32_t id) const
{
    return encodeMessage(kType, id, {{"size", size}, {"budget", budget}, {"base", base}, {"page_size", pageSize}});
}

RegionRequest RegionRequest::decode(const Message& m)
{
    Fields f(m, kType, "region");
    RegionRequest r;
    r.pageSize = f.u32("page_size", 4096, 1u << 30);
    if (!powerOfTwo(r.pageSize))
        f.fail("page_size", "must be a power of two, got " + std::to_string(r.pageSize));
    r.size = f.u64("size", 1);
    if (r.size % r.pageSize)
        f.fail("size", std::to_string(r.size) + " is not a multiple of page_size " + std::to_string(r.pageSize));
    r.budget = f.u64("budget", r.pageSize);
    r.base = f.u64("base", 1);
    if (r.base % r.pageSize)
        f.fail("base", std::to_string(r.base) + " is not aligned to page_size " + std::to_string(r.pageSize));
    if (r.base + r.size < r.base)
        f.fail("size", "base + size overflows");
    return r;
}

std::string OpenFlowRequest::encode(uint32_t id) const
{
    Json j = Json::object();
    if (!iface.empty())
        j["iface"] = iface;
    j["port"] = port;
    j["addr"] = addr;
    if (completionEntries)
        j["completion_ring"] = completionEntries;
    return encodeMessage(kType, id, j);
}

OpenFlowRequest OpenFlowRequest::decode(const Message& m)
{
    Fields f(m, kType, "open_flow");
    OpenFlowRequest r;
    r.iface = f.str("iface", kMaxIfname, false);
    if (!r.iface.empty() && !isInterfaceName(r.iface))
        f.fail("iface", "'" + r.iface + "' is not an interface name");
    r.port = static_cast<uint16_t>(f.u32("port", 1, 65535));
    r.addr = f.str("addr", kMaxAddr, false);
    if (!validAddr(r.addr))
        f.fail("addr", "'" + r.addr + "' is not an IPv4 or IPv6 address");
    r.completionEntries =
        static_cast<uint32_t>(f.optU64("completion_ring", 0, kMaxCompletionEntries).value_or(0));
    if (r.completionEntries && (r.completionEntries < NPF_POST_RING_SIZE || !powerOfTwo(r.completionEntries)))
        f.fail("completion_ring", "must be 0 (default) or a power of two >= " +
                                      std::to_string(NPF_POST_RING_SIZE) + ", got " +
                                      std::to_string(r.completionEntries));
    return r;
}

std::string CloseFlowRequest::encode(uint32_t id) const { return encodeMessage(kType, id, {{"flow", flow}}); }

CloseFlowRequest CloseFlowRequest::decode(const Message& m)
{
    Fields f(m, kType, "close_flow");
    return {f.u32("flow")};
}

namespace {

template <typename R>
R decodeRange(const Message& m)
{
    Fields f(m, R::kType, R::kType);
    R r;
    r.offset = f.u64("offset");
    r.len = f.u64("len", 1);
    if (r.offset + r.len < r.offset)
        f.fail("len", "offset + len overflows");
    return r;
}

} // namespace

std::string ReleaseRequest::encode(uint32_t id) const
{
    Json fields{{"offset", offset}, {"len", len}};
    if (!posted.empty()) {
        Json a = Json::array();
        for (const Posted& p : posted)
            a.push_back(Json::array({p.flow, p.prod}));
        fields["posted"] = std::move(a);
    }
    return encodeMessage(kType, id, fields);
}

ReleaseRequest ReleaseRequest::decode(const Message& m)
{
    ReleaseRequest r = decodeRange<ReleaseRequest>(m);
    Fields f(m, kType, kType);
    const Json* a = f.find("posted", false);
    if (!a)
        return r;
    if (!a->is_array() || a->size() > kMaxPosted)
        f.fail("posted", "must be an array of at most " + std::to_string(kMaxPosted) + " [flow, prod] pairs, got " +
                             describeValue(*a));
    for (const Json& e : *a) {
        if (!e.is_array() || e.size() != 2)
            f.fail("posted", "each entry must be [flow, prod], got " + describeValue(e));
        r.posted.push_back({static_cast<uint32_t>(f.number("posted", e[0], 0, UINT32_MAX)),
                            f.number("posted", e[1], 0, UINT64_MAX)});
    }
    return r;
}

std::string PopulateRequest::encode(uint32_t id) const
{
    return encodeMessage(kType, id, {{"offset", offset}, {"len", len}});
}

PopulateRequest PopulateRequest::decode(const Message& m) { return decodeRange<PopulateRequest>(m); }

std::string StatsRequest::encode(uint32_t id) const { return encodeMessage(kType, id, Json::object()); }

StatsRequest StatsRequest::decode(const Message& m)
{
    expectType(m, kType, "stats");
    return {};
}

std::string FlowStatsRequest::encode(uint32_t id) const { return encodeMessage(kType, id, {{"flow", flow}}); }

FlowStatsRequest FlowStatsRequest::decode(const Message& m)
{
    Fields f(m, kType, "flow_stats");
    return {f.u32("flow")};
}

std::string ByeRequest::encode(uint32_t id) const { return encodeMessage(kType, id, Json::object()); }

ByeRequest ByeRequest::decode(const Message& m)
{
    expectType(m, kType, "bye");
    return {};
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
