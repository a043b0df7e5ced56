// A forked child that plays npfd's client: it creates a memfd, maps it
// MAP_SHARED, registers the mapping with its own userfaultfd (user-mode only,
// as an unprivileged process must), passes the memfd and the uffd to the
// parent over a SOCK_SEQPACKET socketpair (SCM_RIGHTS), then runs commands
// from the parent on its mapping. Test-local: the production fd passing
// lives in userspace/ipc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "region/region.h"
#include "sys/fd.h"

namespace npf::test {

// Sends one message with `fds` attached; 0 or -errno.
int sendWithFds(int sock, const void* data, size_t len, std::span<const int> fds);
// Receives one message (and its fds) within timeoutMs; bytes or -errno
// (-ETIMEDOUT, -ECONNRESET when the peer is gone).
ssize_t recvWithFds(int sock, void* data, size_t len, std::vector<Fd>* fds, int timeoutMs);

struct ClientSpec {
    uint64_t size = 4ull << 20;  // bytes the client claims
    uint64_t memfdSize = 0;      // bytes its memfd really has; 0: size
    bool writeProtect = true;    // register WP as well as MISSING
    bool registerRegion = true;  // false: its uffd covers nothing of the region
    bool dropPrivileges = false; // setuid(65534) before anything else
};

class ClientProcess {
public:
    // Forks the client and waits (bounded) for its memfd and uffd.
    explicit ClientProcess(const ClientSpec& spec);
    ~ClientProcess();
    ClientProcess(const ClientProcess&) = delete;
    ClientProcess& operator=(const ClientProcess&) = delete;

    // "" when the client is set up; else what failed in it (errno text).
    const std::string& error() const { return error_; }
    // The memfd and uffd it passed, with its mapping's address; once.
    ClientMemory memory();
    uint64_t base() const { return base_; }
    uint64_t outsideAddr() const { return outside_; } // a registered page outside the region

    // Commands; each waits (bounded) for the client's answer. A failure is
    // recorded in the test (ADD_FAILURE) and returns empty or false.
    std::vector<uint8_t> read(uint64_t off, uint64_t len);
    bool write(uint64_t off, uint64_t len, uint8_t byte);
    bool fill(uint64_t off, uint64_t len, uint32_t seed); // randomBytes(len, seed)
    bool punch(uint64_t off, uint64_t len);               // fallocate(PUNCH_HOLE) on its memfd
    // Reads one byte of each page of [off, off + len); the ns each took.
    std::vector<uint32_t> touch(uint64_t off, uint64_t len);
    // Word i (from 1) goes to 64-bit word (i * 509) % words of [off, off +
    // len) until stopWriteLoop(), which returns how many were written.
    bool startWriteLoop(uint64_t off, uint64_t len);
    uint64_t stopWriteLoop();
    // Returns once the client is about to touch outsideAddr() (it never returns).
    bool touchOutside();

    pid_t pid() const { return pid_; }
    void kill(); // SIGKILL and reap

private:
    bool call(uint32_t op, uint64_t off, uint64_t len, uint32_t arg, void* reply, size_t replyLen);

    pid_t pid_ = -1;
    Fd sock_;
    Fd memfd_, uffd_;
    uint64_t base_ = 0, outside_ = 0;
    std::string error_;
};

// What a client's write loop left in its words, computed the same way.
std::vector<uint64_t> writeLoopImage(uint64_t len, uint64_t writes);

} // namespace npf::test
