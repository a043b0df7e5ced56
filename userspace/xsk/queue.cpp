#include "xsk/queue.h"

#include "sys/error.h"
#include "sys/log.h"

namespace npf::xsk {

std::string queueName(const QueueConfig& cfg, const std::string& role)
{
    return "xsk " + role + " of queue " + std::to_string(cfg.queue) + " (ifindex " + std::to_string(cfg.ifindex) + ")";
}

void checkQueueIndex(const QueueConfig& cfg)
{
    if (cfg.queue >= NPF_MAX_QUEUES)
        throwErrno(EINVAL, queueName(cfg, "pair") + ": queue must be < " + std::to_string(NPF_MAX_QUEUES));
}

const QueueConfig& QueueSockets::checked(const QueueConfig& cfg)
{
    checkQueueIndex(cfg);
    if (cfg.regionBytes == 0)
        throwErrno(EINVAL, queueName(cfg, "pair") + ": region size not set (metas are checked against it)");
    return cfg;
}

QueueSockets::QueueSockets(const QueueConfig& cfg, const FlowSet& flows, int xskmapFd)
    : QueueSockets(checked(cfg), flows, xskmapFd, openXskSocket(queueName(cfg, "primary")))
{
}

QueueSockets::QueueSockets(const QueueConfig& cfg, const FlowSet& flows, int xskmapFd, Fd ownerFd)
    : cfg_(cfg), flows_(flows), umem_(ownerFd.get(), cfg.umem, queueName(cfg, "socket pair")),
      primary_(XskSocket::bindOwner(std::move(ownerFd), cfg.ifindex, cfg.queue, cfg.primaryRxSize, cfg.mode,
                                    cfg.needWakeup, cfg.multiBuffer, cfg.busyWaitMs, queueName(cfg, "primary"))),
      backup_(XskSocket::bindShared(primary_, cfg.ifindex, cfg.queue, cfg.backupRxSize, queueName(cfg, "backup")))
{
    cfg_.umem = umem_.config();
    if (xskmapFd >= 0) {
        primary_.insertInto(xskmapFd, NPF_XSK_PRIMARY(cfg_.queue));
        backup_.insertInto(xskmapFd, NPF_XSK_BACKUP(cfg_.queue));
    }
    cfg_.multiBuffer = primary_.multiBuffer();
    NPF_INFO("xsk queue %u (ifindex %u): %s mode%s, UMEM %u x %u B = %llu KiB pinned, rx %u/%u", cfg_.queue,
             cfg_.ifindex, primary_.zeroCopy() ? "zero-copy" : "copy", primary_.multiBuffer() ? ", multi-buffer" : "",
             umem_.frameCount(), umem_.frameSize(), static_cast<unsigned long long>(umem_.bytes() / 1024),
             cfg_.primaryRxSize, cfg_.backupRxSize);
}

QueueSockets::QueueSockets(Adopt, const QueueConfig& cfg, const FlowSet& flows, Fd umem, Fd primary, Fd backup)
    : cfg_(checked(cfg)), flows_(flows),
      umem_(Adopt{}, primary.get(), umem.get(), cfg.umem, queueName(cfg, "socket pair")),
      primary_(XskSocket::adopt(std::move(primary), cfg.primaryRxSize, cfg.multiBuffer, queueName(cfg, "primary"))),
      backup_(XskSocket::adopt(std::move(backup), cfg.backupRxSize, cfg.multiBuffer, queueName(cfg, "backup")))
{
    cfg_.umem = umem_.config();
    NPF_INFO("xsk queue %u (ifindex %u), handed over: %s mode%s, UMEM %u x %u B = %llu KiB, rx %u/%u", cfg_.queue,
             cfg_.ifindex, primary_.zeroCopy() ? "zero-copy" : "copy", primary_.multiBuffer() ? ", multi-buffer" : "",
             umem_.frameCount(), umem_.frameSize(), static_cast<unsigned long long>(umem_.bytes() / 1024),
             cfg_.primaryRxSize, cfg_.backupRxSize);
}

void QueueSockets::recycle(const uint64_t* frames, uint32_t n) noexcept
{
    if (n == 0)
        return;
    umem_.recycle(frames, n);
    if (umem_.fillNeedsWakeup()) {
        kicks_.fetch_add(1, std::memory_order_relaxed);
        if (int rc = primary_.kick(); rc < 0)
            NPF_WARN_RL("%s: need_wakeup kick failed: %d", primary_.name().c_str(), rc);
    }
}

void QueueSockets::releaseBackup(const uint64_t* frames, uint32_t n) noexcept
{
    recycle(frames, n);
    held_.fetch_sub(n, std::memory_order_relaxed);
}

int QueueSockets::waitFd(int fd, int timeoutMs) noexcept
{
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, timeoutMs);
    return rc < 0 ? -errno : rc;
}

QueueStats QueueSockets::stats() const
{
    QueueStats s;
    auto rd = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    s.queue = cfg_.queue;
    s.zeroCopy = primary_.zeroCopy();
    s.umemBytes = umem_.bytes();
    s.rxPrimary = rd(primaryCnt_.packets);
    s.rxBackup = rd(backupCnt_.packets);
    s.bytesPrimary = rd(primaryCnt_.bytes);
    s.bytesBackup = rd(backupCnt_.bytes);
    for (size_t i = 0; i < kMetaStatusCount; i++) {
        s.badMetaPrimary[i] = rd(primaryCnt_.badMeta[i]);
        s.badMetaBackup[i] = rd(backupCnt_.badMeta[i]);
    }
    s.backupHeld = rd(held_);
    s.recycled = rd(umem_.counters().recycled);
    s.fillEmpty = rd(umem_.counters().emptyFound);
    s.fillStashed = rd(umem_.counters().stashed);
    s.wakeupKicks = rd(kicks_);
    s.kernelPrimary = primary_.kernelStats();
    s.kernelBackup = backup_.kernelStats();
    return s;
}

} // namespace npf::xsk
