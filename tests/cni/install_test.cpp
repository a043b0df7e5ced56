// npf-cni's place in a node's CNI setup (no root): chained last into the
// first .conflist, brought up to date in place, never written twice, taken
// out again; the binary copied whole.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cni/install.h"

namespace npf::cni {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct Node {
    Node()
    {
        char t[] = "/tmp/npf-cni-node-XXXXXX";
        root = ::mkdtemp(t);
        fs::create_directories(root + "/bin");
        fs::create_directories(root + "/net.d");
        std::ofstream(root + "/self") << "#!/bin/true npf-cni v1";
    }
    ~Node() { fs::remove_all(root); }
    InstallOptions options() const
    {
        return {root + "/bin", root + "/net.d", root + "/self", "/run/npf/pods.sock", "/var/lib/npf/cni"};
    }
    void write(const std::string& name, const std::string& text) const { std::ofstream(root + "/net.d/" + name) << text; }
    Json read(const std::string& name) const
    {
        std::ifstream in(root + "/net.d/" + name);
        std::stringstream s;
        s << in.rdbuf();
        return Json::parse(s.str());
    }
    std::string root;
};

const char* kCalico = R"({"cniVersion": "0.3.1", "name": "k8s-pod-network", "plugins": [
  {"type": "calico", "ipam": {"type": "calico-ipam"}}, {"type": "portmap", "capabilities": {"portMappings": true}}]})";

TEST(CniInstall, ChainsLastIntoTheFirstConflistAndCopiesItself)
{
    Node n;
    n.write("10-calico.conflist", kCalico);
    n.write("20-other.conflist", kCalico);
    const InstallResult r = install(n.options());
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.conflist, n.root + "/net.d/10-calico.conflist");
    const Json j = n.read("10-calico.conflist");
    ASSERT_EQ(j["plugins"].size(), 3u);
    EXPECT_EQ(j["plugins"][0]["type"], "calico");
    EXPECT_EQ(j["plugins"][2], Json::parse(R"({"type": "npf-cni", "socket": "/run/npf/pods.sock",
                                                "state_dir": "/var/lib/npf/cni"})"));
    EXPECT_EQ(j["name"], "k8s-pod-network");
    EXPECT_EQ(n.read("20-other.conflist"), Json::parse(kCalico)) << "only the file the runtime uses";
    struct stat st{};
    ASSERT_EQ(::stat((n.root + "/bin/npf-cni").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0755u);
    EXPECT_FALSE(fs::exists(n.root + "/net.d/.npf-cni.tmp"));

    // Again: nothing to do. Changed options: the entry is updated in place.
    EXPECT_FALSE(install(n.options()).changed);
    InstallOptions o = n.options();
    o.socket = "/run/npf2/pods.sock";
    EXPECT_TRUE(install(o).changed);
    const Json k = n.read("10-calico.conflist");
    ASSERT_EQ(k["plugins"].size(), 3u);
    EXPECT_EQ(k["plugins"][2]["socket"], "/run/npf2/pods.sock");

    EXPECT_TRUE(uninstall(o).changed);
    EXPECT_EQ(n.read("10-calico.conflist")["plugins"], Json::parse(kCalico)["plugins"]);
    EXPECT_FALSE(uninstall(o).changed);
    EXPECT_TRUE(fs::exists(n.root + "/bin/npf-cni")) << "a runtime may be running it";
}

TEST(CniInstall, RefusesWhatItCannotChainInto)
{
    Node n;
    auto why = [&] {
        try {
            install(n.options());
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("installed");
    };
    EXPECT_NE(why().find("holds no network configuration"), std::string::npos) << why();
    n.write("05-bridge.conf", R"({"cniVersion": "0.4.0", "name": "b", "type": "bridge"})");
    n.write("10-calico.conflist", kCalico);
    EXPECT_NE(why().find("05-bridge.conf is a single plugin's configuration"), std::string::npos) << why();
    fs::remove(n.root + "/net.d/05-bridge.conf");
    n.write("00-broken.conflist", R"({"name": "x"})");
    EXPECT_NE(why().find("not a network configuration list"), std::string::npos) << why();
}

} // namespace
} // namespace npf::cni
