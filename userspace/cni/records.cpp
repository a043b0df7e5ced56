#include "cni/records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::cni {
namespace {

using Json = nlohmann::ordered_json;

void writeAll(int fd, const std::string& text, const std::string& file)
{
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throwErrno("write " + file);
        done += static_cast<size_t>(n);
    }
}

} // namespace

void Records::save(const Record& r) const
{
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
        throwErrno("mkdir " + dir_);
    const Json j = {{"container", r.pod.container}, {"namespace", r.pod.ns},   {"name", r.pod.name},
                    {"uid", r.pod.uid},             {"addrs", r.pod.addrs},    {"netns", r.netns}};
    const std::string file = path(r.pod.container), tmp = file + ".tmp";
    {
        Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
        if (!f)
            throwErrno("create " + tmp);
        writeAll(f.get(), j.dump() + "\n", tmp);
        checkErrno(::fsync(f.get()), "fsync " + tmp);
    }
    checkErrno(::rename(tmp.c_str(), file.c_str()), "rename " + tmp + " to " + file);
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
    std::ifstream in(file);
    if (!in) {
        *why = "cannot be read";
        return std::nullopt;
    }
    std::stringstream text;
    text << in.rdbuf();
    const Json j = Json::parse(text.str(), nullptr, false);
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
