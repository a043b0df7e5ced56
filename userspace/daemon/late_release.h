// A client's release as npfd applies it: later than the client made it (a
// message the control thread reads in its turn), while the client may have
// posted the same buffers again, and XDP filled them, in between. The
// release must not discard those: what it may still discard is the range
// minus the pages of every buffer the client posted since
// (ipc::ReleaseRequest::posted says from which post on, per flow).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dataplane/post_ring.h"

namespace npf::daemon {

// One flow's posts since the release: seqs [from, reader.published()).
struct PostsSince {
    dataplane::PostReader reader;
    uint64_t from = 0; // the flow's published prod when the client released
};

struct ByteRange {
    uint64_t offset = 0, len = 0;
    bool operator==(const ByteRange&) const = default;
};

// [offset, offset + len) minus the 4 KiB pages (the unit a release marks) of
// every buffer posted since, as ascending ranges. nullopt when a flow has
// posted more than its ring holds since: those posts are overwritten, which
// buffers they were is unknown, and nothing may be discarded. A `from` ahead
// of the ring (the client's word, wrong) leaves nothing out of its flow.
std::optional<std::vector<ByteRange>> lateRelease(uint64_t offset, uint64_t len, std::span<const PostsSince> flows);

} // namespace npf::daemon
