// Only include/npf: what an application linking libnpf gets.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "npf/abi.h"
#include "npf/counters.h"
#include "npf/engine.h"
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

} // namespace
