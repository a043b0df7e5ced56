// The npf-cni binary as a runtime runs it: the answer on stdout, the exit
// status. Calls that need no npfd and no namespace.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace {

// Runs npf-cni with `env` (VAR=value ...) and `input` on stdin; its stdout.
std::string run(const std::string& env, const std::string& input, int* status)
{
    const std::string cmd = "printf '%s' '" + input + "' | env -i " + env + " " NPF_CNI_PATH;
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    for (size_t n; p && (n = std::fread(buf, 1, sizeof(buf), p)) > 0;)
        out.append(buf, n);
    const int st = p ? ::pclose(p) : -1;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

TEST(NpfCniPlugin, AnswersVersion)
{
    int status = 0;
    const auto j = nlohmann::json::parse(run("CNI_COMMAND=VERSION", R"({"cniVersion": "0.4.0"})", &status));
    EXPECT_EQ(status, 0);
    EXPECT_EQ(j["cniVersion"], "0.4.0");
    EXPECT_EQ(j["supportedVersions"].size(), 4u);
}

TEST(NpfCniPlugin, PrintsTheErrorObjectAndFails)
{
    int status = 0;
    const std::string out = run("CNI_COMMAND=ADD CNI_CONTAINERID=abc CNI_NETNS=/run/netns/x CNI_IFNAME=eth0",
                                R"({"cniVersion": "1.0.0", "name": "n", "type": "npf-cni"})", &status);
    EXPECT_EQ(status, 1);
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["cniVersion"], "1.0.0");
    EXPECT_EQ(j["code"], 4) << out; // CNI_ARGS names no pod
    EXPECT_NE(j["msg"].get<std::string>().find("K8S_POD_NAMESPACE"), std::string::npos) << out;
}

TEST(NpfCniPlugin, WithoutCniCommandItIsACommandThatWantsASubcommand)
{
    int status = 0;
    (void)run("", "", &status);
    EXPECT_EQ(status, 2);
}

} // namespace
