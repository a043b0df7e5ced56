// The CNI protocol as npf-cni reads it: what a runtime passes and what it
// must get back (the CNI specification 1.0, "Execution Protocol" and
// "Result Types"). No kernel, no npfd.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cni/cni.h"

namespace npf::cni {
namespace {

using Env = std::map<std::string, std::string>;

Call call(const Env& env, const std::string& stdinText)
{
    return parseCall(
        [&](const char* n) -> const char* {
            auto it = env.find(n);
            return it == env.end() ? nullptr : it->second.c_str();
        },
        stdinText);
}

Env addEnv()
{
    return {{"CNI_COMMAND", "ADD"},
            {"CNI_CONTAINERID", "0123abcd"},
            {"CNI_NETNS", "/var/run/netns/cni-1234"},
            {"CNI_IFNAME", "eth0"},
            {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=tenant-a;K8S_POD_NAME=web-0;"
                         "K8S_POD_INFRA_CONTAINER_ID=0123abcd;K8S_POD_UID=5e1f-77"}};
}

const char* kConfig = R"({"cniVersion": "1.0.0", "name": "k8s-pod-network", "type": "npf-cni",
  "socket": "/run/npf/pods.sock",
  "prevResult": {"cniVersion": "1.0.0",
    "interfaces": [{"name": "eth0", "sandbox": "/var/run/netns/cni-1234"}],
    "ips": [{"address": "198.18.7.10/24", "interface": 0}, {"address": "2001:0db8::0a/64", "interface": 0},
            {"address": "198.18.7.10/32"}]}})";

// A CniError's code, or -1 if `f` did not throw one.
template <typename F>
int codeOf(F f)
{
    try {
        f();
    } catch (const CniError& e) {
        return static_cast<int>(e.code());
    }
    return -1;
}

TEST(Cni, AddNamesThePodItsAddressesAndPassesPrevResultOn)
{
    const Call c = call(addEnv(), kConfig);
    EXPECT_EQ(c.command, "ADD");
    EXPECT_EQ(c.podsSocket, "/run/npf/pods.sock");
    EXPECT_EQ(c.stateDir, kDefaultStateDir);
    const ipc::PodInfo p = podOf(c);
    EXPECT_EQ(p.container, "0123abcd");
    EXPECT_EQ(p.ns, "tenant-a");
    EXPECT_EQ(p.name, "web-0");
    EXPECT_EQ(p.uid, "5e1f-77");
    // Prefix lengths dropped, IPv6 made canonical, the duplicate listed once.
    EXPECT_EQ(p.addrs, (std::vector<std::string>{"198.18.7.10", "2001:db8::a"}));
    EXPECT_TRUE(p.owns("2001:DB8:0::A"));
    EXPECT_FALSE(p.owns("198.18.7.11"));
    EXPECT_FALSE(p.owns(""));
    const Json out = addResult(c);
    EXPECT_EQ(out, Json::parse(kConfig)["prevResult"]);
}

TEST(Cni, ArgsAreKeyValuePairs)
{
    EXPECT_EQ(parseArgs("A=1;B=;;C=x=y"), (std::map<std::string, std::string>{{"A", "1"}, {"B", ""}, {"C", "x=y"}}));
    EXPECT_EQ(codeOf([] { parseArgs("A=1;junk"); }), int(Code::InvalidEnvironment));
    EXPECT_EQ(codeOf([] { parseArgs("=1"); }), int(Code::InvalidEnvironment));
}

TEST(Cni, CallsItCannotServeGetTheSpecificationsCodes)
{
    Env e = addEnv();
    e.erase("CNI_COMMAND");
    EXPECT_EQ(codeOf([&] { call(e, kConfig); }), int(Code::InvalidEnvironment));
    e = addEnv();
    e["CNI_COMMAND"] = "GC";
    EXPECT_EQ(codeOf([&] { call(e, kConfig); }), int(Code::InvalidEnvironment));
    e = addEnv();
    e["CNI_CONTAINERID"] = "../../etc";
    EXPECT_EQ(codeOf([&] { call(e, kConfig); }), int(Code::InvalidEnvironment));
    e = addEnv();
    e.erase("CNI_NETNS");
    EXPECT_EQ(codeOf([&] { call(e, kConfig); }), int(Code::InvalidEnvironment));
    EXPECT_EQ(codeOf([&] { call(addEnv(), "not json"); }), int(Code::DecodeFailure));
    EXPECT_EQ(codeOf([&] { call(addEnv(), R"({"name": "x"})"); }), int(Code::InvalidNetworkConfig));
    EXPECT_EQ(codeOf([&] { call(addEnv(), R"({"cniVersion": "9.9.9"})"); }), int(Code::IncompatibleVersion));
    EXPECT_EQ(codeOf([&] { call(addEnv(), R"({"cniVersion": "1.0.0", "socket": "relative"})"); }),
              int(Code::InvalidNetworkConfig));
}

TEST(Cni, AnAddThatNamesNoPodOrNoAddressIsRefused)
{
    Env e = addEnv();
    e["CNI_ARGS"] = "IgnoreUnknown=1"; // a runtime that is not the kubelet's
    EXPECT_EQ(codeOf([&] { podOf(call(e, kConfig)); }), int(Code::InvalidEnvironment));
    e["CNI_ARGS"] = "K8S_POD_NAMESPACE=Tenant_A;K8S_POD_NAME=web-0";
    EXPECT_EQ(codeOf([&] { podOf(call(e, kConfig)); }), int(Code::InvalidEnvironment));
    // First in the chain: nothing gave the pod an address.
    EXPECT_EQ(codeOf([&] { podOf(call(addEnv(), R"({"cniVersion": "1.0.0"})")); }), int(Code::InvalidNetworkConfig));
    EXPECT_EQ(codeOf([&] { podOf(call(addEnv(), R"({"cniVersion": "1.0.0", "prevResult": {"ips": []}})")); }),
              int(Code::InvalidNetworkConfig));
    EXPECT_EQ(codeOf([&] {
                  podOf(call(addEnv(), R"({"cniVersion": "1.0.0", "prevResult": {"ips": [{"address": "x/24"}]}})"));
              }),
              int(Code::DecodeFailure));
}

TEST(Cni, DelNeedsNoNamespaceAndVersionNeedsNoConfig)
{
    Env e = addEnv();
    e["CNI_COMMAND"] = "DEL";
    e.erase("CNI_NETNS"); // the runtime may have removed it already
    EXPECT_EQ(call(e, R"({"cniVersion": "0.4.0"})").command, "DEL");
    const Call v = call({{"CNI_COMMAND", "VERSION"}}, "");
    const Json r = versionResult(v.cniVersion);
    EXPECT_EQ(r["cniVersion"], "1.0.0");
    EXPECT_EQ(r["supportedVersions"], Json::parse(R"(["0.3.0", "0.3.1", "0.4.0", "1.0.0"])"));
}

TEST(Cni, TheErrorObjectHasCodeMsgAndDetails)
{
    const Json j = errorResult("0.4.0", CniError(Code::IncompatibleVersion, "no", "why"));
    EXPECT_EQ(j, Json::parse(R"({"cniVersion": "0.4.0", "code": 1, "msg": "no", "details": "why"})"));
}

} // namespace
} // namespace npf::cni
