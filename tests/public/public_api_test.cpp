// Only include/npf: what an application linking libnpf gets.
#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <system_error>
#include <stdexcept>
#include <string>
#include <vector>

#include "npf/abi.h"
#include "npf/counters.h"
#include "npf/engine.h"
#include "npf/error.h"
#include "npf/interface.h"
#include "npf/log.h"

namespace {

TEST(PublicApi, CounterTableCoversEngineStats)
{
    npf::EngineStats s;
    uint64_t v = 1;
    std::set<std::string> names;
    for (const auto& c : npf::kEngineCounters) {
        s.*c.member = v++;
        EXPECT_TRUE(names.insert(c.name).second) << c.name;
        EXPECT_NE(std::string(c.help), "");
        EXPECT_NE(std::string(c.unit), "");
    }
    EXPECT_STREQ(npf::counterDef(&npf::EngineStats::fastPath).name, "fast_path");
    EXPECT_EQ(s.*npf::counterDef(&npf::EngineStats::deferDrops).member, s.deferDrops);
}

TEST(PublicApi, LogLinesReachTheApplicationsSink)
{
    std::vector<std::string> lines;
    npf::log::setSink([&](npf::log::Level, std::string_view l) { lines.emplace_back(l); });
    npf::log::setLevel(npf::log::Level::Info);
    NPF_INFO("hello %d", 7);
    NPF_DEBUG("filtered");
    npf::log::setSink({});
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0], "hello 7");
}

TEST(PublicApi, BadConfigIsAClearError)
{
    npf::EngineConfig cfg;
    cfg.ifname = "npf-no-such-if0";
    cfg.regionSize = 4097; // not a multiple of the page
    try {
        npf::Engine e(cfg);
        FAIL() << "an engine with a bad region size started";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("region size"), std::string::npos) << e.what();
    }
}

// What the library throws is classified without its internal types: a bad
// region size is an Argument, a missing interface NoDevice, a bad address
// Argument; anything else is what its errno says.
TEST(PublicApi, ErrorsAreClassifiedFromOutsideTheLibrary)
{
    auto kindOf = [](auto&& f) {
        try {
            f();
        } catch (const std::exception& e) {
            return npf::errorKind(e);
        }
        return npf::ErrorKind(-1);
    };
    EXPECT_EQ(kindOf([] { npf::Engine e({.ifname = "npf-no-such-if0", .regionSize = 4097}); }),
              npf::ErrorKind::Argument);
    EXPECT_EQ(kindOf([] { npf::checkFlowAddress("198.18.0.300"); }), npf::ErrorKind::Argument);
    EXPECT_NO_THROW(npf::checkFlowAddress("198.18.0.1"));
    EXPECT_NO_THROW(npf::checkFlowAddress(""));
    EXPECT_EQ(kindOf([] { (void)npf::interfaceRxDrops("npf-no-such-if0"); }), npf::ErrorKind::NoDevice);
    EXPECT_EQ(kindOf([] { throw std::system_error(EACCES, std::generic_category(), "x"); }),
              npf::ErrorKind::Permission);
    EXPECT_EQ(kindOf([] { throw std::runtime_error("x"); }), npf::ErrorKind::Failure);
}

// The stats as JSON and text name their counters; an empty flow prints no outcome.
TEST(PublicApi, StatsAsJsonAndText)
{
    npf::FlowStats f;
    EXPECT_EQ(npf::formatXdpOutcomes(f), "");
    f.xdp[NPF_STAT_DROP_RNR - NPF_STAT_FLOW_FIRST] = 3;
    f.completedOk = 9;
    EXPECT_EQ(npf::formatXdpOutcomes(f), "drop_rnr=3");
    const std::string j = npf::toJson(f);
    EXPECT_NE(j.find("\"drop_rnr\":3"), std::string::npos) << j;
    EXPECT_NE(j.find("\"reached\":3"), std::string::npos) << j;
    npf::EngineStats s;
    s.fastPath = 5;
    EXPECT_NE(npf::toJson(s).find("\"fast_path\":5"), std::string::npos) << npf::toJson(s);
    EXPECT_EQ(npf::formatCounters(s, {&npf::EngineStats::fastPath}), "fast_path=5");
    EXPECT_NO_THROW((void)npf::interfaceRxDrops("lo"));
}

} // namespace
