// The application's side of one flow (npf::Flow): posting buffers and
// polling completions. One application thread. The same code serves an
// in-process engine's flow (the engine's side is ServedFlow) and an npfd
// client's (the daemon's side is a ServedFlow in npfd; the client maps the
// flow's post ring map and completion ring from the fds npfd passed it).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/post_ring.h"
#include "npf/engine.h"
#include "order/completion_ring.h"
#include "sys/fd.h"

namespace npf {

class Region;

struct Flow::Impl {
    // What the flow runs on: its ring (mapped by whoever owns `ringMap`), its
    // completion ring, the region its buffers lie in.
    struct Parts {
        uint32_t id = 0;
        uint16_t port = 0;
        npf_ring* ring = nullptr;
        CompletionRing* completions = nullptr;
        uint64_t regionSize = 0;
        Region* region = nullptr; // in-process: posted buffers are protected from eviction; npfd: nullptr
        // npfd client: the mappings it owns, the connection that hangs up
        // when npfd is gone, and why the flow stopped ("" while served).
        std::optional<dataplane::FlowRing> ringMap;
        std::unique_ptr<CompletionRing> ownCompletions;
        int hangupFd = -1;
        std::function<std::string()> failure;
        // 0 while served, else the negative errno poll()/wait()/arm() return
        // (npf/engine.h). probe = false: only what is known already, no
        // system call (poll's empty path); true: may ask the kernel.
        std::function<int(bool probe)> error;
        std::function<FlowStats()> stats; // Flow::stats: the engine's, or a request to npfd
        // EngineConfig::runToCompletion: one batch of every queue's fast
        // path on the caller's thread, and the sockets to sleep on for it.
        std::function<uint32_t()> runFastPath;
        std::vector<int> fastPathFds;
        // npfd client: sends the releases the client holds back when wait()
        // timed out with nothing (the flow is idle; never blocks).
        std::function<void()> idle;
    };
    explicit Impl(Parts p);
    // Lifts the eviction protection of the buffers still outstanding.
    ~Impl();

    // What the application posted in each slot, kept on its own side: the
    // cookie its completion returns, the range protect() covered.
    struct Posted {
        uint64_t offset;
        uint64_t cookie;
        uint32_t len;
        bool isProtected; // protect() took it (the budget may leave it out)
    };

    Parts parts;
    std::unique_ptr<dataplane::PostProducer> posts;
    CompletionConsumer completions;
    uint64_t polled; // completions taken: posts - polled buffers are outstanding
    std::unique_ptr<Posted[]> posted; // NPF_POST_RING_SIZE, by seq & mask
    // Run to completion: an epoll set of the notifier and parts.fastPathFds
    // (level-triggered), eventFd() then; readable when either has work.
    Fd events;
};

} // namespace npf
