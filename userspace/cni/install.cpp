#include "cni/install.h"

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "cni/files.h"
#include "sys/error.h"

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
    Json j = Json::parse(readWhole(file), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("plugins") || !j["plugins"].is_array())
        throw Error(EINVAL, file + ": not a network configuration list (no \"plugins\" array)");
    return j;
}

// Replaces `file` whole, through a temporary file in its directory not named
// like a configuration (no runtime reads it half-written).
void replace(const std::string& file, const std::string& bytes, mode_t mode)
{
    replaceWhole(file, (fs::path(file).parent_path() / ".npf-cni.tmp").string(), bytes, mode);
}

} // namespace

InstallResult install(const InstallOptions& o)
{
    if (!o.self.empty()) {
        const std::string target = (fs::path(o.binDir) / kType).string();
        const std::string bytes = readWhole(o.self);
        std::error_code ec;
        if (!fs::exists(target, ec) || readWhole(target) != bytes)
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
