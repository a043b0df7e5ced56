// gtest fixtures: skip without root, fail if a stock tool the tests drive is
// missing, one fresh Rig per test (destroyed, with its cleanup, on failure too).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "rig.h"

namespace npf::itest {

class RigTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!test::isRoot())
            GTEST_SKIP() << "needs root: network namespaces, veth, XDP, bpffs";
        for (const char* tool : {"nsenter", "ip", "sysctl", "ping", "socat", "nc", "bpftool"})
            ASSERT_EQ(test::sh(std::string("command -v ") + tool + " >/dev/null"), 0)
                << tool << " is missing (apt-get install iproute2 util-linux procps iputils-ping socat "
                << "netcat-openbsd bpftool)";
        rig_ = std::make_unique<Rig>(vethOptions());
    }
    void TearDown() override { rig_.reset(); }

    virtual test::VethOptions vethOptions() const { return {}; }
    Rig& rig() { return *rig_; }
    const std::string& ifname() const { return rig_->rxIf(); }

private:
    std::unique_ptr<Rig> rig_;
};

// Parameter: the attach mode, "native" or "skb".
class ModeTest : public RigTest, public ::testing::WithParamInterface<std::string> {
protected:
    const std::string& mode() const { return GetParam(); }
    // Value of the "mode" of IFLA_XDP in `ip -j link` (XDP_ATTACHED_DRV/SKB).
    int ipLinkMode() const { return mode() == "native" ? 1 : 2; }
    // The `ip link set ... <flag> obj` attach flag for this mode.
    std::string ipXdpFlag() const { return mode() == "native" ? "xdpdrv" : "xdpgeneric"; }
};

inline std::string modeName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

#define NPF_INSTANTIATE_MODES(suite) \
    INSTANTIATE_TEST_SUITE_P(Modes, suite, ::testing::Values("native", "skb"), ::npf::itest::modeName)

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

} // namespace npf::itest
