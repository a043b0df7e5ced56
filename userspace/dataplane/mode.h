// XDP attach mode of an npf program instance. (Its command-line spellings: cli/args.h.)
#pragma once

namespace npf::dataplane {

enum class AttachMode {
    Native, // driver mode (XDP_FLAGS_DRV_MODE), the default
    Skb,    // generic mode (XDP_FLAGS_SKB_MODE), works on any device, slower
};

constexpr const char* toString(AttachMode m) { return m == AttachMode::Native ? "native" : "skb"; }

// The mode to suggest when `m` is not supported.
constexpr AttachMode otherMode(AttachMode m) { return m == AttachMode::Native ? AttachMode::Skb : AttachMode::Native; }

} // namespace npf::dataplane
