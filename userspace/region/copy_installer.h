// Installs missing pages with UFFDIO_COPY, or UFFDIO_MOVE from a page pool:
// each page image is built in staging, or in the pool's next pages (its
// saved content from the spill file, or zeros, then its payload pieces from
// the PatchPlan), then copied, or moved, in and mapped by one ioctl per run
// of consecutive pages, so a page appears with its payloads already in it.
// With a client's memory (npfd) the copy goes into the client's mapping
// where it can, so that the client pays for the page: through its
// userfaultfd on a thread of ours (ClientInstaller, 4 KiB pages), or by a
// thread of the client (RemoteInstaller, 2 MiB pages); else (no such
// installer, or it is not ready: late, slow, retired) into the region's own
// mapping.
// Called with its region's lock held.
#pragma once

#include <cstdint>
#include <string>

#include "region/batch_timing.h"
#include "region/install_batch.h"
#include "region/region_parts.h"

namespace npf {

class ClientInstaller;
class PagePool;
class PageReserve;
class RemoteInstaller;

class CopyInstaller {
public:
    // Installs into the mapping of `io` through `uffd` (registered over it),
    // up to batchPages pages per ioctl (staging holds that many images),
    // moving pages from `pool` while it has some (an empty PagePool: never).
    // Keeps references: the region's parts, filled in before the first install.
    // Before each copy into our mapping, frees as many pages of `reserve`.
    CopyInstaller(const RegionParts& parts, const MmapArea& staging, PagePool& pool, PageReserve& reserve,
                  uint32_t batchPages) noexcept
        : uffd_(parts.uffd), io_(parts.io), state_(parts.state), spill_(parts.spill), plan_(parts.plan),
          staging_(staging), pool_(pool), reserve_(reserve), batchPages_(batchPages), c_(parts.counters),
          name_(parts.name)
    {
    }

    // Copies into the client's mapping at `clientBase` (region offset 0)
    // through `client` from now on, whenever it is ready().
    void throughClient(ClientInstaller* client, uint64_t clientBase) noexcept
    {
        client_ = client;
        clientBase_ = clientBase;
    }

    void install(const InstallBatch& b, BatchTiming* t) noexcept;
    // Has the client's own thread install (and allocate) pages from now on,
    // whenever `remote` is ready().
    void throughRemote(RemoteInstaller* remote) noexcept { remote_ = remote; }

    // Lets the pages of a late client job be evicted once it has ended.
    // install() calls it; so must eviction.
    void settle() noexcept;

private:
    // How a run's pages go in: copied into our mapping, moved from the pool,
    // copied into the client's mapping through its userfaultfd, or by the
    // client's thread (then checked, and completed, by a copy into ours).
    enum class Via { Copy, Move, Client, Remote };

    // A run of at most batchPages consecutive pages, its images built at
    // `images` (staging, the pool's next pages, or the client installer's buffer).
    // Via::Remote: at most remote_->images() pages.
    void installRun(const InstallBatch& run, uint8_t* images, Via via, BatchTiming* t) noexcept;
    // Saved content or zeros, then payloads, for a run into `images`; 0 or
    // -errno (reading the spill file).
    int buildImages(const InstallBatch& run, uint8_t* images) noexcept;
    void zeroAround(uint8_t* page, size_t begin, size_t end) const noexcept;
    // UFFDIO_COPY (or UFFDIO_MOVE) of a run of consecutive pages whose
    // images are at `images`; true if an image was left behind (an error).
    bool put(const InstallBatch& run, uint8_t* images, Via via, BatchTiming* t) noexcept;
    // One ioctl of put(): the rest of a run, [done, len) of its bytes.
    long putOnce(const InstallBatch& run, uint8_t* images, Via via, uint64_t done, uint64_t len,
                 int64_t* got) noexcept;
    // The client installer refused pages [k, run.size()) with rc: they go
    // through our mapping instead; a late job's stay protected until settle().
    void clientRefused(const InstallBatch& run, size_t k, long rc) noexcept;
    // Pages installed now (copied, or found present) no longer need their
    // saved copy: counted as restored, dropped from the spill file.
    void dropRestored(const InstallBatch& run) noexcept;
    // A late client job may still install pages [k, run.size()) of `run`:
    // none may be evicted until it has ended (settle()); put() copies them
    // into ours meanwhile.
    void protectLate(const InstallBatch& run, size_t k) noexcept;
    // Posts a run (its images in remote_->buffer()) to the client's thread;
    // sets claimed_ to the pages it says it installed.
    void askRemote(const InstallBatch& run) noexcept;
    // UFFDIO_COPY found pages[k] present: installed by the client's thread
    // as it said (k < claimed_), through the client's userfaultfd in a run
    // it was asked for without saying so (a late job finishing after the
    // deadline), or populated behind our back.
    int onExisting(const InstallBatch& run, size_t k) noexcept;

    const Userfaultfd& uffd_;
    const PageIo& io_;
    PageState& state_;
    const SpillFile& spill_;
    const PatchPlan& plan_;
    const MmapArea& staging_;
    PagePool& pool_;
    PageReserve& reserve_;
    ClientInstaller* client_ = nullptr;
    uint64_t clientBase_ = 0;
    RemoteInstaller* remote_ = nullptr;
    size_t claimed_ = 0; // of the run in put(): pages the client's thread says it installed
    bool askedClient_ = false; // the run in put() went to the client's mapping (Via::Client, Via::Remote)
    uint64_t lateOffset_ = 0, lateLen_ = 0; // a late client job's pages, protected
    const uint32_t batchPages_;
    RegionCounters& c_;
    const std::string& name_;
};

} // namespace npf
