// npf-cni's records of pods: written whole, private, read back with the
// checks npfd applies, the unreadable ones named and skipped.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cni/records.h"

namespace npf::cni {
namespace {

struct Dir {
    Dir()
    {
        char t[] = "/tmp/npf-cni-XXXXXX";
        path = ::mkdtemp(t);
    }
    ~Dir() { std::filesystem::remove_all(path); }
    std::string path;
};

Record record(const std::string& container, const std::string& name)
{
    return Record{ipc::PodInfo{container, "tenant-a", name, "uid-1", {"198.18.7.10"}}, "/run/netns/" + name};
}

TEST(CniRecords, SaveListFindRemove)
{
    Dir d;
    const Records r(d.path + "/state"); // made on first save
    r.save(record("bbb", "web-1"));
    r.save(record("aaa", "web-0"));
    struct stat st{};
    ASSERT_EQ(::stat((d.path + "/state").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(::stat((d.path + "/state/aaa.json").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    std::vector<std::string> bad;
    const std::vector<Record> all = r.list(&bad);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_TRUE(bad.empty());
    EXPECT_EQ(all[0].pod.container, "aaa");
    EXPECT_EQ(all[0].pod.name, "web-0");
    EXPECT_EQ(all[0].netns, "/run/netns/web-0");
    EXPECT_EQ(all[1].pod.addrs, (std::vector<std::string>{"198.18.7.10"}));
    ASSERT_TRUE(r.find("bbb"));
    r.remove("bbb");
    r.remove("bbb"); // gone already: fine
    EXPECT_FALSE(r.find("bbb"));
    EXPECT_EQ(r.list(nullptr).size(), 1u);
}

TEST(CniRecords, BrokenRecordsAreNamedAndSkipped)
{
    Dir d;
    const Records r(d.path);
    r.save(record("good", "web-0"));
    std::ofstream(d.path + "/junk.json") << "{";
    std::ofstream(d.path + "/evil.json")
        << R"({"container": "evil", "namespace": "tenant-a", "name": "x", "addrs": ["not an address"], "netns": "/x"})";
    std::ofstream(d.path + "/nons.json")
        << R"({"container": "nons", "namespace": "tenant-a", "name": "x", "addrs": ["198.18.0.1"]})";
    std::ofstream(d.path + "/other.txt") << "ignored";
    std::vector<std::string> bad;
    const std::vector<Record> all = r.list(&bad);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].pod.container, "good");
    ASSERT_EQ(bad.size(), 3u);
    std::string text;
    for (const std::string& b : bad)
        text += b + "\n";
    EXPECT_NE(text.find("evil.json: pod_add: \"addrs\""), std::string::npos) << text;
    EXPECT_NE(text.find("nons.json: no \"netns\""), std::string::npos) << text;
}

} // namespace
} // namespace npf::cni
