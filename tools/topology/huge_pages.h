// 2 MiB huge pages for a test or a benchmark run: raises
// /proc/sys/vm/nr_hugepages by what it needs and gives them back at the end.
// Runs in parallel add and remove their own share under one flock, so none
// lowers another's.
#pragma once

#include <cstdint>
#include <string>

namespace npf::topology {

// AnonHugePages of the mapping that holds `addr`: KiB of it mapped by
// PMD-mapped transparent huge pages (/proc/self/smaps); -1 when no mapping
// holds it.
long anonHugeKiB(const void* addr);

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

    // Touches every page of the pool once and gives it back. On a VM whose
    // host backs guest memory lazily the first use of a freshly reserved huge
    // page costs milliseconds (3.3 ms measured here); a pool reserved at boot
    // has had that paid. Returns the seconds it took.
    double warm() const;

private:
    uint64_t added_ = 0;
    bool ok_ = false;
    std::string why_;
};

} // namespace npf::topology
