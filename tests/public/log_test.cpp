// libnpf's public logger (npf/log.h) as an application sees it: built with the
// public include dir only. Levels, the -v count, the sink, the rate limit, and
// libbpf's output through the same sink.
#include <gtest/gtest.h>

#include <bpf/libbpf.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "npf/log.h"

namespace npf::log {
namespace {

// Collects what reaches the sink; restores stderr and Info on exit.
class LogTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        setLevel(Level::Info);
        setSink([this](Level l, std::string_view text) { lines.emplace_back(l, std::string(text)); });
    }
    void TearDown() override
    {
        setSink({});
        setLevel(Level::Info);
    }
    std::vector<std::pair<Level, std::string>> lines;
};

TEST_F(LogTest, LevelFiltersAndSinkGetsBareLines)
{
    NPF_ERR("e %d", 1);
    NPF_WARN("w");
    NPF_INFO("i\n\n");
    NPF_DEBUG("d");
    NPF_TRACE("t");
    const std::vector<std::pair<Level, std::string>> want = {
        {Level::Error, "e 1"}, {Level::Warn, "w"}, {Level::Info, "i"}};
    EXPECT_EQ(lines, want);
}

TEST_F(LogTest, VerbosityCountsFromBaseAndCapsAtTrace)
{
    const struct {
        int v;
        Level base, want;
    } cases[] = {
        {0, Level::Info, Level::Info},   {1, Level::Info, Level::Debug}, {2, Level::Info, Level::Trace},
        {9, Level::Info, Level::Trace},  {0, Level::Warn, Level::Warn},  {1, Level::Warn, Level::Info},
        {0, Level::Error, Level::Error},
    };
    for (const auto& c : cases) {
        setVerbosity(c.v, c.base);
        EXPECT_EQ(level(), c.want) << "-v x" << c.v << " from " << levelName(c.base);
    }
}

TEST_F(LogTest, ThrowingSinkDropsTheLine)
{
    setSink([](Level, std::string_view) { throw std::runtime_error("sink"); });
    NPF_ERR("dropped");
    setSink([this](Level l, std::string_view text) { lines.emplace_back(l, std::string(text)); });
    NPF_ERR("kept");
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].second, "kept");
}

TEST_F(LogTest, RateLimitedWarningsReportWhatTheySuppressed)
{
    for (int i = 0; i < 25; i++)
        NPF_WARN_RL("hot %d", i);
    ASSERT_EQ(lines.size(), 10u); // the default burst
    EXPECT_EQ(lines.back().second, "hot 9");
}

TEST_F(LogTest, LibbpfWarningsGoThroughTheSink)
{
    routeLibbpf();
    bpf_object* obj = bpf_object__open_file("/nonexistent/npf-log-test.bpf.o", nullptr);
    EXPECT_EQ(obj, nullptr);
    bool seen = false;
    for (const auto& [l, text] : lines)
        seen |= l == Level::Warn && text.find("npf-log-test.bpf.o") != std::string::npos;
    EXPECT_TRUE(seen) << "no libbpf warning naming the file reached the sink";
}

} // namespace
} // namespace npf::log
