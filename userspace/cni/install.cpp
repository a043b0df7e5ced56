#include "cni/install.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::cni {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kType = "npf-cni";

// The configuration the runtime uses: the first of the directory's
// configuration files by name.
std::string firstConfig(const std::string& dir)
{
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string ext = e.path().extension().string();
        if (e.is_regular_file() && (ext == ".conf" || ext == ".conflist" || ext == ".json"))
            files.push_back(e.path().string());
    }
    if (ec)
        throw Error(ec.value(), "read " + dir + ": " + ec.message());
    if (files.empty())
        throw Error(ENOENT, dir + " holds no network configuration: install the cluster's CNI first (npf-cni is "
                                  "chained after it)");
    std::sort(files.begin(), files.end());
    if (!files.front().ends_with(".conflist"))
        throw Error(EINVAL, files.front() + " is a single plugin's configuration: npf-cni chains into a .conflist "
                                            "(a \"plugins\" list); convert it, or configure the CNI to write one");
    return files.front();
}

Json readJson(const std::string& file)
{
    std::ifstream in(file);
    if (!in)
        throwErrno("read " + file);
    std::stringstream text;
    text << in.rdbuf();
    Json j = Json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("plugins") || !j["plugins"].is_array())
        throw Error(EINVAL, file + ": not a network configuration list (no \"plugins\" array)");
    return j;
}

// Writes `bytes` to `file` through a temporary file in its directory (not
// named like a configuration, so no runtime reads it half-written).
void replace(const std::string& file, const std::string& bytes, mode_t mode)
{
    const std::string tmp = (fs::path(file).parent_path() / ".npf-cni.tmp").string();
    {
        Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
        if (!f)
            throwErrno("create " + tmp);
        size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n = ::write(f.get(), bytes.data() + done, bytes.size() - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                throwErrno("write " + tmp);
            done += static_cast<size_t>(n);
        }
        checkErrno(::fchmod(f.get(), mode), "chmod " + tmp);
        checkErrno(::fsync(f.get()), "fsync " + tmp);
    }
    checkErrno(::rename(tmp.c_str(), file.c_str()), "rename " + tmp + " to " + file);
}

std::string slurp(const std::string& file)
{
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throwErrno("read " + file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

InstallResult install(const InstallOptions& o)
{
    if (!o.self.empty()) {
        const std::string target = (fs::path(o.binDir) / kType).string();
        const std::string bytes = slurp(o.self);
        std::error_code ec;
        if (!fs::exists(target, ec) || slurp(target) != bytes)
            replace(target, bytes, 0755);
    }
    InstallResult r{firstConfig(o.confDir), false};
    Json list = readJson(r.conflist);
    const Json entry = {{"type", kType}, {"socket", o.socket}, {"state_dir", o.stateDir}};
    Json& plugins = list["plugins"];
    auto it = std::find_if(plugins.begin(), plugins.end(), [](const Json& p) { return p.value("type", "") == kType; });
    if (it != plugins.end() && *it == entry && it + 1 == plugins.end())
        return r; // there, up to date, last
    if (it != plugins.end())
        plugins.erase(it);
    plugins.push_back(entry); // last: after the plugins that give the pod its addresses
    replace(r.conflist, list.dump(2) + "\n", 0644);
    r.changed = true;
    return r;
}

InstallResult uninstall(const InstallOptions& o)
{
    InstallResult r{firstConfig(o.confDir), false};
    Json list = readJson(r.conflist);
    Json& plugins = list["plugins"];
    const size_t before = plugins.size();
    plugins.erase(std::remove_if(plugins.begin(), plugins.end(),
                                 [](const Json& p) { return p.value("type", "") == kType; }),
                  plugins.end());
    if (plugins.size() == before)
        return r;
    replace(r.conflist, list.dump(2) + "\n", 0644);
    r.changed = true;
    return r;
}

} // namespace npf::cni
