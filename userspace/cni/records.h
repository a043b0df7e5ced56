// npf-cni's record of every pod it gave a listener: what it needs to make
// the listener again after npfd restarts (a listener lives only as long as
// npfd holds it), without the runtime calling the plugin again. One file per
// pod, DIR/<container id>.json, mode 0600 in a 0700 directory (root's:
// the pod's identity is what npfd trusts), written whole (a temporary file
// renamed over it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ipc/pods.h"

namespace npf::cni {

struct Record {
    ipc::PodInfo pod;
    std::string netns; // CNI_NETNS: the pod's network namespace (a bind mount the runtime keeps while the pod lives)
};

class Records {
public:
    explicit Records(std::string dir) : dir_(std::move(dir)) {}

    void save(const Record& r) const;                  // creates the directory; throws naming the file
    void remove(const std::string& container) const;   // absent: nothing to do
    std::optional<Record> find(const std::string& container) const;
    // Every record, in container id order; files that do not parse are
    // skipped and named in *bad ("FILE: why").
    std::vector<Record> list(std::vector<std::string>* bad) const;
    const std::string& dir() const noexcept { return dir_; }

private:
    std::string path(const std::string& container) const { return dir_ + "/" + container + ".json"; }
    std::optional<Record> read(const std::string& file, std::string* why) const;

    std::string dir_;
};

} // namespace npf::cni
