// The protocol's messages: every request and reply survives encode -> parse
// -> decode; malformed input of every kind is a ProtocolError with the right
// code naming the field; unknown fields are ignored.
#include "ipc/protocol.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace npf::test {
namespace {

using namespace npf::ipc;

// The code and message of the ProtocolError f() throws.
struct Thrown {
    bool thrown = false;
    ErrorCode code = ErrorCode::Internal;
    uint32_t id = 0;
    std::string what;
};

Thrown thrownBy(const std::function<void()>& f)
{
    try {
        f();
    } catch (const ProtocolError& e) {
        return {true, e.code(), e.id(), e.what()};
    }
    return {};
}

TEST(Protocol, ErrorCodeNames)
{
    const std::pair<ErrorCode, const char*> names[] = {
        {ErrorCode::BadMessage, "bad_message"}, {ErrorCode::BadVersion, "bad_version"},
        {ErrorCode::NotAllowed, "not_allowed"}, {ErrorCode::Busy, "busy"},
        {ErrorCode::NoSpace, "no_space"},       {ErrorCode::BadFd, "bad_fd"},
        {ErrorCode::TooLarge, "too_large"},     {ErrorCode::NoRegion, "no_region"},
        {ErrorCode::NoFlow, "no_flow"},         {ErrorCode::Internal, "internal"},
        {ErrorCode::ShuttingDown, "shutting_down"},
    };
    for (auto [code, name] : names) {
        EXPECT_EQ(toString(code), name);
        EXPECT_EQ(parseErrorCode(name), code) << name;
        EXPECT_GT(defaultErrno(code), 0) << name;
        EXPECT_EQ(ProtocolError(code, "x").err(), defaultErrno(code));
    }
    EXPECT_EQ(parseErrorCode("no_such_code"), std::nullopt);
    EXPECT_EQ(parseErrorCode(""), std::nullopt);
    EXPECT_EQ(ProtocolError(ErrorCode::Internal, "x", ENOMEM).err(), ENOMEM);
}

TEST(Protocol, ParseRefusesWhatIsNotAMessage)
{
    struct Case {
        const char* name;
        std::string bytes;
        uint32_t id; // the id the error carries: 0 when it could not be read
    };
    const Case cases[] = {
        {"empty", "", 0},
        {"garbage", "\x01\xff garbage", 0},
        {"truncated", R"({"type":"hello","id":1)", 0},
        {"array", R"([{"type":"hello","id":1}])", 0},
        {"number", "42", 0},
        {"string", R"("hello")", 0},
        {"null", "null", 0},
        {"no id", R"({"type":"hello"})", 0},
        {"negative id", R"({"type":"hello","id":-1})", 0},
        {"float id", R"({"type":"hello","id":1.5})", 0},
        {"exponent id", R"({"type":"hello","id":1e3})", 0},
        {"huge id", R"({"type":"hello","id":4294967296})", 0},
        {"id beyond uint64", R"({"type":"hello","id":18446744073709551616})", 0},
        {"string id", R"({"type":"hello","id":"1"})", 0},
        {"null id", R"({"type":"hello","id":null})", 0},
        {"no type", R"({"id":7})", 7},
        {"number type", R"({"id":7,"type":5})", 7},
        {"empty type", R"({"id":7,"type":""})", 7},
        {"long type", R"({"id":7,"type":")" + std::string(65, 't') + "\"}", 7},
        {"invalid utf-8", "{\"id\":7,\"type\":\"\xc3\x28\"}", 0},
    };
    for (const Case& c : cases) {
        Thrown t = thrownBy([&] { parse(c.bytes); });
        EXPECT_TRUE(t.thrown) << c.name;
        EXPECT_EQ(t.code, ErrorCode::BadMessage) << c.name;
        EXPECT_EQ(t.id, c.id) << c.name;
    }
}

TEST(Protocol, ParseReadsTypeAndId)
{
    Message m = parse(R"({"id":4294967295,"type":"stats","extra":[1,2]})");
    EXPECT_EQ(m.type, "stats");
    EXPECT_EQ(m.id, 4294967295u);
    EXPECT_EQ(m.body["extra"].size(), 2u);
}

TEST(Protocol, EncodePutsTypeAndIdFirst)
{
    EXPECT_EQ(CloseFlowRequest{3}.encode(9), R"({"type":"close_flow","id":9,"flow":3})");
    EXPECT_EQ(FlowStatsRequest{3}.encode(9), R"({"type":"flow_stats","id":9,"flow":3})");
    EXPECT_EQ(OkReply{}.encode(9), R"({"type":"ok","id":9})");
    EXPECT_EQ(encodeMessage("x", 1, {{"id", 5}, {"type", "y"}, {"a", 1}}), R"({"type":"x","id":1,"a":1})");
}

// Field errors: (message, field the error must name).
struct FieldCase {
    std::string json;
    std::string field;
};

template <typename T>
void expectFieldErrors(const std::vector<FieldCase>& cases)
{
    for (const FieldCase& c : cases) {
        Message m = parse(c.json);
        Thrown t = thrownBy([&] { T::decode(m); });
        EXPECT_TRUE(t.thrown) << c.json;
        EXPECT_EQ(t.code, ErrorCode::BadMessage) << c.json;
        EXPECT_EQ(t.id, m.id) << c.json;
        EXPECT_NE(t.what.find("\"" + c.field + "\""), std::string::npos) << c.json << " -> " << t.what;
    }
}

TEST(Protocol, HelloFieldErrors)
{
    expectFieldErrors<HelloRequest>({
        {R"({"type":"hello","id":1,"abi":2})", "protocol"},
        {R"({"type":"hello","id":1,"protocol":-1,"abi":2})", "protocol"},
        {R"({"type":"hello","id":1,"protocol":1.0,"abi":2})", "protocol"},
        {R"({"type":"hello","id":1,"protocol":"1","abi":2})", "protocol"},
        {R"({"type":"hello","id":1,"protocol":null,"abi":2})", "protocol"},
        {R"({"type":"hello","id":1,"protocol":4294967296,"abi":2})", "protocol"},
        {R"({"type":"hello","id":1,"protocol":1})", "abi"},
        {R"({"type":"hello","id":1,"protocol":1,"abi":true})", "abi"},
        {R"({"type":"hello","id":1,"protocol":1,"abi":2,"name":")" + std::string(65, 'n') + "\"}", "name"},
        {R"({"type":"hello","id":1,"protocol":1,"abi":2,"name":"a\nb"})", "name"},
        {R"({"type":"hello","id":1,"protocol":1,"abi":2,"name":7})", "name"},
        {R"({"type":"hello","id":1,"protocol":1,"abi":2,"name":["x"]})", "name"},
    });
}

TEST(Protocol, RegionFieldErrors)
{
    const std::string ok = R"("size":1048576,"budget":65536,"base":140737488289792)";
    expectFieldErrors<RegionRequest>({
        {R"({"type":"region","id":2,"budget":4096,"base":4096,"page_size":4096})", "size"},
        {R"({"type":"region","id":2,"size":0,"budget":4096,"base":4096,"page_size":4096})", "size"},
        {R"({"type":"region","id":2,"size":-4096,"budget":4096,"base":4096,"page_size":4096})", "size"},
        {R"({"type":"region","id":2,"size":1e30,"budget":4096,"base":4096,"page_size":4096})", "size"},
        {R"({"type":"region","id":2,"size":18446744073709551616,"budget":4096,"base":4096,"page_size":4096})",
         "size"},
        {R"({"type":"region","id":2,"size":5000,"budget":4096,"base":4096,"page_size":4096})", "size"},
        {R"({"type":"region","id":2,"size":8192,"budget":100,"base":4096,"page_size":4096})", "budget"},
        {R"({"type":"region","id":2,"size":8192,"budget":4096,"base":0,"page_size":4096})", "base"},
        {R"({"type":"region","id":2,"size":8192,"budget":4096,"base":4097,"page_size":4096})", "base"},
        {R"({"type":"region","id":2,"size":8192,"budget":4096,"base":18446744073709547520,"page_size":4096})",
         "size"},
        {R"({"type":"region","id":2,"size":8192,"budget":4096,"base":4096,"page_size":3000})", "page_size"},
        {R"({"type":"region","id":2,"size":8192,"budget":4096,"base":4096,"page_size":6144})", "page_size"},
        {R"({"type":"region","id":2,"size":8192,"budget":4096,"base":4096})", "page_size"},
        {"{\"type\":\"region\",\"id\":2," + ok + ",\"page_size\":2048}", "page_size"},
    });
}

TEST(Protocol, OpenFlowFieldErrors)
{
    expectFieldErrors<OpenFlowRequest>({
        {R"({"type":"open_flow","id":3})", "port"},
        {R"({"type":"open_flow","id":3,"port":0})", "port"},
        {R"({"type":"open_flow","id":3,"port":65536})", "port"},
        {R"({"type":"open_flow","id":3,"port":-9000})", "port"},
        {R"({"type":"open_flow","id":3,"port":"9000"})", "port"},
        {R"({"type":"open_flow","id":3,"port":9000.5})", "port"},
        {R"({"type":"open_flow","id":3,"port":9000,"addr":"1.2.3"})", "addr"},
        {R"({"type":"open_flow","id":3,"port":9000,"addr":"10.0.0.1/24"})", "addr"},
        {R"({"type":"open_flow","id":3,"port":9000,"addr":")" + std::string(46, '1') + "\"}", "addr"},
        {R"({"type":"open_flow","id":3,"port":9000,"addr":4})", "addr"},
        {R"({"type":"open_flow","id":3,"port":9000,"iface":"a/b"})", "iface"},
        {R"({"type":"open_flow","id":3,"port":9000,"iface":"sixteen-chars-xx"})", "iface"},
        {R"({"type":"open_flow","id":3,"port":9000,"completion_ring":1000})", "completion_ring"},
        {R"({"type":"open_flow","id":3,"port":9000,"completion_ring":2048})", "completion_ring"},
        {R"({"type":"open_flow","id":3,"port":9000,"completion_ring":2097152})", "completion_ring"},
        {R"({"type":"open_flow","id":3,"port":9000,"completion_ring":-1})", "completion_ring"},
    });
}

TEST(Protocol, OtherRequestFieldErrors)
{
    expectFieldErrors<CloseFlowRequest>({
        {R"({"type":"close_flow","id":4})", "flow"},
        {R"({"type":"close_flow","id":4,"flow":4294967296})", "flow"},
    });
    expectFieldErrors<FlowStatsRequest>({
        {R"({"type":"flow_stats","id":4})", "flow"},
        {R"({"type":"flow_stats","id":4,"flow":null})", "flow"},
        {R"({"type":"flow_stats","id":4,"flow":-1})", "flow"},
        {R"({"type":"flow_stats","id":4,"flow":1.5})", "flow"},
        {R"({"type":"flow_stats","id":4,"flow":"3"})", "flow"},
        {R"({"type":"flow_stats","id":4,"flow":4294967296})", "flow"},
    });
    expectFieldErrors<ReleaseRequest>({
        {R"({"type":"release","id":5,"len":4096})", "offset"},
        {R"({"type":"release","id":5,"offset":0,"len":0})", "len"},
        {R"({"type":"release","id":5,"offset":18446744073709551615,"len":2})", "len"},
        {R"({"type":"release","id":5,"offset":0,"len":1,"posted":7})", "posted"},
        {R"({"type":"release","id":5,"offset":0,"len":1,"posted":[[1]]})", "posted"},
        {R"({"type":"release","id":5,"offset":0,"len":1,"posted":[[1,2,3]]})", "posted"},
        {R"({"type":"release","id":5,"offset":0,"len":1,"posted":[[4294967296,0]]})", "posted"},
        {R"({"type":"release","id":5,"offset":0,"len":1,"posted":[[1,-1]]})", "posted"},
        {R"({"type":"release","id":5,"offset":0,"len":1,"posted":[{"flow":1}]})", "posted"},
    });
    expectFieldErrors<PopulateRequest>({
        {R"({"type":"populate","id":6,"offset":0})", "len"},
        {R"({"type":"populate","id":6,"offset":-1,"len":1})", "offset"},
    });
}

TEST(Protocol, ReplyFieldErrors)
{
    expectFieldErrors<HelloReply>({
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":0,"ifaces":[],"limits":{}})", "daemon_pid"},
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":9,"ifaces":"eth0","limits":{}})", "ifaces"},
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":9,"ifaces":[5],"limits":{}})", "ifaces"},
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":9,"ifaces":["eth0"],"limits":{}})",
         "region_bytes"},
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":9,"ifaces":["eth0"],"limits":[]})", "limits"},
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":9,"ifaces":[],"limits":{"region_bytes":1,)"
         R"("resident_bytes":1,"flows":1},"free":{"region_bytes":1}})", "resident_bytes"},
        {R"({"type":"ok","id":1,"protocol":1,"abi":2,"daemon_pid":9,"ifaces":[],"limits":{"region_bytes":1,)"
         R"("resident_bytes":1,"flows":1},"default_budget":-1})", "default_budget"},
    });
    expectFieldErrors<OpenFlowReply>({
        {R"({"type":"ok","id":3,"flow":1,"gen":1,"port":0,"ring_size":4096,"completion_entries":8192})", "port"},
        {R"({"type":"ok","id":3,"flow":1,"gen":1,"port":9,"ring_size":4000,"completion_entries":8192})",
         "ring_size"},
        {R"({"type":"ok","id":3,"flow":1,"gen":1,"port":9,"ring_size":4096,"completion_entries":3})",
         "completion_entries"},
    });
    expectFieldErrors<StatsReply>({{R"({"type":"ok","id":7,"stats":[]})", "stats"}});
    expectFieldErrors<FlowStatsReply>({
        {R"({"type":"ok","id":7})", "stats"},
        {R"({"type":"ok","id":7,"stats":null})", "stats"},
        {R"({"type":"ok","id":7,"stats":[1]})", "stats"},
        {R"({"type":"ok","id":7,"stats":12})", "stats"},
    });
    expectFieldErrors<ErrorReply>({
        {R"({"type":"error","id":7,"errno":5,"message":"m"})", "code"},
        {R"({"type":"error","id":7,"code":"busy","errno":-5,"message":"m"})", "errno"},
        {R"({"type":"error","id":7,"code":"busy","errno":5})", "message"},
    });
}

TEST(Protocol, DecodeChecksTheType)
{
    Message bye = parse(R"({"type":"bye","id":8})");
    Thrown t = thrownBy([&] { HelloRequest::decode(bye); });
    EXPECT_TRUE(t.thrown);
    EXPECT_EQ(t.code, ErrorCode::BadMessage);
    EXPECT_NE(t.what.find("'bye'"), std::string::npos) << t.what;
    EXPECT_TRUE(thrownBy([&] { OkReply::decode(parse(R"({"type":"error","id":8})")); }).thrown);
    EXPECT_TRUE(thrownBy([&] { RegionReply::decode(bye); }).thrown);
    // flow_stats and close_flow have the same field: the type tells them apart.
    Thrown f = thrownBy([&] { FlowStatsRequest::decode(parse(R"({"type":"close_flow","id":8,"flow":1})")); });
    EXPECT_TRUE(f.thrown);
    EXPECT_EQ(f.code, ErrorCode::BadMessage);
    EXPECT_EQ(f.id, 8u);
    EXPECT_TRUE(thrownBy([&] { FlowStatsReply::decode(parse(R"({"type":"error","id":8,"stats":{}})")); }).thrown);
}

TEST(Protocol, UnknownFieldsAreIgnoredAndNullIsAbsent)
{
    HelloRequest h = HelloRequest::decode(parse(
        R"({"type":"hello","id":1,"protocol":1,"abi":2,"future":{"deep":[1,{"x":null}]},"name":null})"));
    EXPECT_EQ(h.protocol, 1u);
    EXPECT_EQ(h.name, "");
    OpenFlowRequest o = OpenFlowRequest::decode(
        parse(R"({"type":"open_flow","id":3,"port":9000,"addr":null,"iface":null,"completion_ring":null,"z":1.5})"));
    EXPECT_EQ(o.port, 9000);
    EXPECT_EQ(o.addr, "");
    EXPECT_EQ(o.iface, "");
    EXPECT_EQ(o.completionEntries, 0u);
    OkReply::decode(parse(R"({"type":"ok","id":1,"later":"fields"})"));
}

template <typename T>
T roundTrip(const T& v, uint32_t id)
{
    Message m = parse(v.encode(id));
    EXPECT_EQ(m.id, id);
    EXPECT_EQ(m.type, T::kType);
    return T::decode(m);
}

TEST(Protocol, RequestsRoundTrip)
{
    HelloRequest h{.protocol = 1, .abi = NPF_ABI_VERSION, .name = "app-ünïcode 1"};
    HelloRequest h2 = roundTrip(h, 1);
    EXPECT_EQ(h2.protocol, h.protocol);
    EXPECT_EQ(h2.abi, h.abi);
    EXPECT_EQ(h2.name, h.name);
    EXPECT_EQ(roundTrip(HelloRequest{}, 0).name, "");

    RegionRequest r{.size = 1ull << 40, .budget = 1ull << 28, .base = 0x7f0000000000, .pageSize = 2u << 20};
    RegionRequest r2 = roundTrip(r, 2);
    EXPECT_EQ(r2.size, r.size);
    EXPECT_EQ(r2.budget, r.budget);
    EXPECT_EQ(r2.base, r.base);
    EXPECT_EQ(r2.pageSize, r.pageSize);

    for (const OpenFlowRequest& o : {OpenFlowRequest{"eth0", 9000, "10.0.0.1", 8192},
                                     OpenFlowRequest{"", 65535, "fe80::1", 0}, OpenFlowRequest{"", 1, "", 1u << 20}}) {
        OpenFlowRequest o2 = roundTrip(o, 3);
        EXPECT_EQ(o2.iface, o.iface);
        EXPECT_EQ(o2.port, o.port);
        EXPECT_EQ(o2.addr, o.addr);
        EXPECT_EQ(o2.completionEntries, o.completionEntries);
    }
    EXPECT_EQ(roundTrip(CloseFlowRequest{31}, 4).flow, 31u);
    EXPECT_EQ(roundTrip(FlowStatsRequest{0}, 4).flow, 0u);
    EXPECT_EQ(roundTrip(FlowStatsRequest{4294967295u}, 4).flow, 4294967295u);
    ReleaseRequest rel = roundTrip(ReleaseRequest{4096, 1ull << 33}, 5);
    EXPECT_EQ(rel.offset, 4096u);
    EXPECT_EQ(rel.len, 1ull << 33);
    EXPECT_TRUE(rel.posted.empty()) << "absent: an older client's release";
    const std::vector<ReleaseRequest::Posted> posted{{3, 0}, {4294967295u, 18446744073709551615ull}};
    EXPECT_EQ(roundTrip(ReleaseRequest{0, 4096, posted}, 5).posted, posted);
    PopulateRequest pop = roundTrip(PopulateRequest{0, 1}, 6);
    EXPECT_EQ(pop.offset, 0u);
    EXPECT_EQ(pop.len, 1u);
    roundTrip(StatsRequest{}, 7);
    roundTrip(ByeRequest{}, 4294967295u);
}

TEST(Protocol, RepliesRoundTrip)
{
    roundTrip(OkReply{}, 1);

    HelloReply h;
    h.daemonPid = 4242;
    h.ifaces = {"eth0", "veth1"};
    h.limits = {1ull << 30, 256ull << 20, 64};
    HelloReply h2 = roundTrip(h, 1);
    EXPECT_EQ(h2.protocol, kProtocolVersion);
    EXPECT_EQ(h2.abi, uint32_t(NPF_ABI_VERSION));
    EXPECT_EQ(h2.daemonPid, 4242u);
    EXPECT_EQ(h2.ifaces, h.ifaces);
    EXPECT_EQ(h2.limits.regionBytes, h.limits.regionBytes);
    EXPECT_EQ(h2.limits.residentBytes, h.limits.residentBytes);
    EXPECT_EQ(h2.limits.flows, 64u);
    EXPECT_FALSE(h2.defaultBudget) << "none sent: an npfd before 2026-12";
    h.free = {1ull << 29, 16ull << 20, 7};
    h.defaultBudget = 0; // none free: a budget of 0, not "none sent"
    h2 = roundTrip(h, 1);
    EXPECT_EQ(h2.free.regionBytes, 1ull << 29);
    EXPECT_EQ(h2.free.residentBytes, 16ull << 20);
    EXPECT_EQ(h2.free.flows, 7u);
    ASSERT_TRUE(h2.defaultBudget);
    EXPECT_EQ(*h2.defaultBudget, 0u);

    EXPECT_EQ(roundTrip(RegionReply{7}, 2).region, 7u);

    OpenFlowReply o{.flow = 5, .gen = 4000000000u, .port = 9000, .ringSize = NPF_POST_RING_SIZE,
                    .completionEntries = 8192};
    OpenFlowReply o2 = roundTrip(o, 3);
    EXPECT_EQ(o2.flow, 5u);
    EXPECT_EQ(o2.gen, 4000000000u);
    EXPECT_EQ(o2.port, 9000);
    EXPECT_EQ(o2.ringSize, uint32_t(NPF_POST_RING_SIZE));
    EXPECT_EQ(o2.completionEntries, 8192u);

    EXPECT_EQ(roundTrip(PagesReply{1ull << 40}, 4).pages, 1ull << 40);

    StatsReply s;
    s.stats = {{"interface", "eth0"}, {"counters", {{"fast_path", 12}, {"fault_path", 3}}}};
    EXPECT_EQ(roundTrip(s, 5).stats, s.stats);

    FlowStatsReply fs;
    fs.stats = {{"xdp", {{"drop_rnr", 3}, {"redir_primary", 18446744073709551615ull}}}, {"completed_ok", 9}};
    const FlowStatsReply fs2 = roundTrip(fs, 5);
    EXPECT_EQ(fs2.stats, fs.stats);
    EXPECT_EQ(fs2.stats["xdp"]["redir_primary"].get<uint64_t>(), 18446744073709551615ull);

    ErrorReply e{ErrorCode::Busy, EBUSY, "port 9000 is held by another client (pid 77)"};
    ErrorReply e2 = roundTrip(e, 6);
    EXPECT_EQ(e2.code, ErrorCode::Busy);
    EXPECT_EQ(e2.err, uint32_t(EBUSY));
    EXPECT_EQ(e2.message, e.message);
}

TEST(Protocol, ErrorRepliesFromErrors)
{
    ProtocolError pe(ErrorCode::NoFlow, "no flow 3 on this connection", 0, 12);
    ErrorReply e = ErrorReply::from(pe);
    EXPECT_EQ(e.code, ErrorCode::NoFlow);
    EXPECT_EQ(e.err, uint32_t(ENOENT));
    EXPECT_EQ(e.message, "no flow 3 on this connection");
    EXPECT_EQ(e.encode(pe.id()),
              R"({"type":"error","id":12,"code":"no_flow","errno":2,"message":"no flow 3 on this connection"})");

    // A code from a newer daemon reads as internal; the message survives.
    ErrorReply future =
        ErrorReply::decode(parse(R"({"type":"error","id":1,"code":"quota_exceeded","errno":122,"message":"m"})"));
    EXPECT_EQ(future.code, ErrorCode::Internal);
    EXPECT_EQ(future.err, 122u);
}

// npfd serves its own protocol and the one before, each in its own
// version; the library's ABI does not matter from protocol 3 on.
TEST(Protocol, NegotiateServesThisProtocolAndThePreviousOne)
{
    EXPECT_EQ(negotiate(HelloRequest{}), kProtocolVersion);
    EXPECT_EQ(negotiate(HelloRequest{.abi = NPF_ABI_VERSION + 1}), kProtocolVersion) << "a newer library, same wire";
    EXPECT_EQ(negotiate(HelloRequest{.protocol = kOldestProtocol, .abi = kProtocol2Abi}), kOldestProtocol);
    EXPECT_EQ(kOldestProtocol, kProtocolVersion - 1);

    const HelloReply now = helloReplyFor(kProtocolVersion), before = helloReplyFor(kOldestProtocol);
    EXPECT_EQ(now.protocol, kProtocolVersion);
    EXPECT_EQ(now.abi, uint32_t(NPF_ABI_VERSION));
    EXPECT_EQ(before.protocol, kOldestProtocol);
    EXPECT_EQ(before.abi, kProtocol2Abi) << "a protocol 2 client reads the ring layouts there";
}

TEST(Protocol, NegotiateRefusesOthersNamingBothSidesAndTheFix)
{
    const std::string npfd = "npfd speaks protocol " + std::to_string(kOldestProtocol) + " or " +
                             std::to_string(kProtocolVersion);
    const struct {
        HelloRequest hello;
        std::string says;
    } cases[] = {
        {HelloRequest{.protocol = kProtocolVersion + 1}, "upgrade npfd"},
        {HelloRequest{.protocol = kProtocolVersion + 7}, "upgrade npfd"},
        {HelloRequest{.protocol = kOldestProtocol - 1}, "upgrade the client"},
        {HelloRequest{.protocol = 0}, "upgrade the client"},
        {HelloRequest{.protocol = 2, .abi = kProtocol2Abi - 1}, "upgrade the client"},
        {HelloRequest{.protocol = 2, .abi = kProtocol2Abi + 1}, "upgrade the client"},
    };
    for (const auto& c : cases) {
        Thrown t = thrownBy([&] { negotiate(c.hello); });
        EXPECT_TRUE(t.thrown) << c.hello.protocol;
        EXPECT_EQ(t.code, ErrorCode::BadVersion);
        EXPECT_NE(t.what.find("client speaks protocol " + std::to_string(c.hello.protocol)), std::string::npos)
            << t.what;
        EXPECT_NE(t.what.find(npfd), std::string::npos) << t.what;
        EXPECT_NE(t.what.find(c.says), std::string::npos) << t.what;
    }
}

TEST(Protocol, LargestRepliesFitOneMessage)
{
    HelloReply h;
    h.daemonPid = 1;
    for (size_t i = 0; i < kMaxIfaces; ++i)
        h.ifaces.push_back("iface-name-" + std::to_string(i));
    h.limits = h.free = {~0ull, ~0ull, ~0u};
    h.defaultBudget = ~0ull;
    EXPECT_LE(h.encode(~0u).size(), kMaxMessage);
    ErrorReply e{ErrorCode::Internal, 255, std::string(kMaxText, 'm')};
    EXPECT_LE(e.encode(~0u).size(), kMaxMessage);
}

} // namespace
} // namespace npf::test
