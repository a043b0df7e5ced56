// 2 MiB huge pages for a test: raises /proc/sys/vm/nr_hugepages by what the
// test needs and gives them back at the end. Tests running in parallel add
// and remove their own share under one flock, so none lowers another's.
#pragma once

#include <cstdint>
#include <string>

namespace npf::test {

class HugePages {
public:
    explicit HugePages(uint64_t pages);
    ~HugePages();
    HugePages(const HugePages&) = delete;
    HugePages& operator=(const HugePages&) = delete;

    // False when the kernel could not find that many (memory too fragmented,
    // no hugetlbfs, not root); why() says which.
    bool ok() const { return ok_; }
    const std::string& why() const { return why_; }

private:
    uint64_t added_ = 0;
    bool ok_ = false;
    std::string why_;
};

} // namespace npf::test
