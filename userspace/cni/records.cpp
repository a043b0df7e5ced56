#include "cni/records.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cni/files.h"
#include "sys/error.h"

namespace npf::cni {

using Json = nlohmann::ordered_json;

void Records::save(const Record& r) const
{
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
        throwErrno("mkdir " + dir_);
    const Json j = {{"container", r.pod.container}, {"namespace", r.pod.ns},   {"name", r.pod.name},
                    {"uid", r.pod.uid},             {"addrs", r.pod.addrs},    {"netns", r.netns}};
    const std::string file = path(r.pod.container);
    replaceWhole(file, file + ".tmp", j.dump() + "\n", 0600);
}

void Records::remove(const std::string& container) const
{
    if (::unlink(path(container).c_str()) != 0 && errno != ENOENT)
        throwErrno("remove " + path(container));
}

std::optional<Record> Records::find(const std::string& container) const
{
    std::string why;
    return read(path(container), &why);
}

std::optional<Record> Records::read(const std::string& file, std::string* why) const
{
    std::string text;
    try {
        text = readWhole(file);
    } catch (const std::exception&) {
        *why = "cannot be read";
        return std::nullopt;
    }
    const Json j = Json::parse(text, nullptr, false);
    // The record is read back as the message npfd would get: the same checks.
    try {
        if (!j.is_object())
            throw std::runtime_error("not a JSON object");
        Json msg = j;
        msg.erase("netns");
        const ipc::PodAddRequest rq = ipc::PodAddRequest::decode(ipc::Message{"pod_add", 0, msg});
        auto ns = j.find("netns");
        if (ns == j.end() || !ns->is_string() || ns->get_ref<const std::string&>().empty())
            throw std::runtime_error("no \"netns\"");
        return Record{rq.pod, ns->get<std::string>()};
    } catch (const std::exception& e) {
        *why = e.what();
        return std::nullopt;
    }
}

std::vector<Record> Records::list(std::vector<std::string>* bad) const
{
    std::vector<Record> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
        if (e.path().extension() != ".json")
            continue;
        std::string why;
        if (auto r = read(e.path().string(), &why))
            out.push_back(std::move(*r));
        else if (bad)
            bad->push_back(e.path().string() + ": " + why);
    }
    std::sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.pod.container < b.pod.container; });
    return out;
}

} // namespace npf::cni
