#include "huge_pages.h"

#include <sys/mman.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "sys/fd.h"

namespace npf::topology {
namespace {

constexpr const char* kNr = "/proc/sys/vm/nr_hugepages";
constexpr const char* kFree = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
constexpr const char* kLock = "/run/npf-test-hugepages.lock";

// A count of 2 MiB pages from `path` (nr_hugepages unless told).
bool readCount(uint64_t* v, const char* path = kNr)
{
    Fd f(::open(path, O_RDONLY | O_CLOEXEC));
    char buf[32] = {};
    if (!f || ::read(f.get(), buf, sizeof(buf) - 1) <= 0)
        return false;
    *v = std::strtoull(buf, nullptr, 10);
    return true;
}

bool writeCount(uint64_t v)
{
    Fd f(::open(kNr, O_WRONLY | O_CLOEXEC));
    const std::string s = std::to_string(v);
    return f && ::write(f.get(), s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

class PoolLock {
public:
    PoolLock() : fd_(::open(kLock, O_RDWR | O_CREAT | O_CLOEXEC, 0600))
    {
        if (fd_)
            while (::flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
            }
    }
    ~PoolLock()
    {
        if (fd_)
            (void)::flock(fd_.get(), LOCK_UN);
    }

private:
    Fd fd_;
};

} // namespace

HugePages::HugePages(uint64_t pages)
{
    PoolLock lock;
    uint64_t before = 0, after = 0;
    if (!readCount(&before)) {
        why_ = std::string(kNr) + " unreadable: no hugetlbfs?";
        return;
    }
    if (!writeCount(before + pages) || !readCount(&after)) {
        why_ = std::string("cannot write ") + kNr + ": " + std::strerror(errno) + " (root needed)";
        return;
    }
    added_ = after > before ? after - before : 0;
    ok_ = added_ >= pages;
    if (!ok_)
        why_ = "the kernel found " + std::to_string(added_) + " of " + std::to_string(pages) +
               " free 2 MiB pages (memory fragmented?)";
}

double HugePages::warm() const
{
    const auto start = std::chrono::steady_clock::now();
    uint64_t free = 0;
    (void)readCount(&free, kFree);
    const size_t len = free << 21;
    if (!len)
        return 0;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    for (size_t off = 0; off < len; off += 2u << 20)
        static_cast<volatile char*>(p)[off] = 1;
    ::munmap(p, len);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

HugePages::~HugePages()
{
    if (!added_)
        return;
    PoolLock lock;
    uint64_t now = 0;
    if (readCount(&now))
        (void)writeCount(now > added_ ? now - added_ : 0);
}

long anonHugeKiB(const void* addr)
{
    std::ifstream f("/proc/self/smaps");
    const auto a = reinterpret_cast<uintptr_t>(addr);
    bool in = false;
    for (std::string line; std::getline(f, line);) {
        unsigned long lo = 0, hi = 0;
        long kb = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2)
            in = lo <= a && a < hi;
        else if (in && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1)
            return kb;
    }
    return -1;
}

} // namespace npf::topology
