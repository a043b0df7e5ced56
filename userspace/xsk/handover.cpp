#include "xsk/handover.h"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>

#include "npf/abi.h"
#include "sys/log.h"
#include "xsk/queue.h"
#include "xsk/umem.h"

namespace npf::xsk {

DelegatedQueue::DelegatedQueue(const QueueConfig& cfg, int xskmapFd) : cfg_(cfg)
{
    checkQueueIndex(cfg_);
    Fd owner = openXskSocket(queueName(cfg_, "delegated primary"));
    umem_ = registerSharedUmem(owner.get(), cfg_.umem, queueName(cfg_, "delegated socket pair"));
    primary_ = XskSocket::bindOwner(std::move(owner), cfg_.ifindex, cfg_.queue, cfg_.primaryRxSize, cfg_.mode,
                                    cfg_.needWakeup, cfg_.multiBuffer, cfg_.busyWaitMs,
                                    queueName(cfg_, "delegated primary"));
    backup_ = XskSocket::bindShared(primary_, cfg_.ifindex, cfg_.queue, cfg_.backupRxSize,
                                    queueName(cfg_, "delegated backup"));
    cfg_.multiBuffer = primary_.multiBuffer();
    if (xskmapFd >= 0) {
        primary_.insertInto(xskmapFd, NPF_XSK_PRIMARY(cfg_.queue));
        backup_.insertInto(xskmapFd, NPF_XSK_BACKUP(cfg_.queue));
        xskmap_ = xskmapFd;
    }
    NPF_INFO("xsk queue %u (ifindex %u) made to hand over: %s mode%s, UMEM %u x %u B = %llu KiB pinned, rx %u/%u",
             cfg_.queue, cfg_.ifindex, primary_.zeroCopy() ? "zero-copy" : "copy",
             cfg_.multiBuffer ? ", multi-buffer" : "", cfg_.umem.frameCount, cfg_.umem.frameSize,
             static_cast<unsigned long long>(uint64_t(cfg_.umem.frameCount) * cfg_.umem.frameSize / 1024),
             cfg_.primaryRxSize, cfg_.backupRxSize);
}

DelegatedQueue::~DelegatedQueue()
{
    if (xskmap_ < 0)
        return;
    for (uint32_t slot : {NPF_XSK_BACKUP(cfg_.queue), NPF_XSK_PRIMARY(cfg_.queue)})
        if (bpf_map_delete_elem(xskmap_, &slot) != 0 && errno != ENOENT)
            NPF_WARN("%s: taking slot %u out of the XSKMAP: %s", queueName(cfg_, "delegated socket pair").c_str(),
                     slot, strerror(errno));
}

} // namespace npf::xsk
