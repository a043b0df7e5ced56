// XDP attach mode of an npf program instance.
#pragma once

#include <optional>
#include <string_view>

namespace npf::ctl {

enum class AttachMode {
    Native, // driver mode (XDP_FLAGS_DRV_MODE), the default
    Skb,    // generic mode (XDP_FLAGS_SKB_MODE), works on any device, slower
};

constexpr const char* toString(AttachMode m) { return m == AttachMode::Native ? "native" : "skb"; }

// "native" / "drv" / "skb" / "generic"; nullopt for anything else.
constexpr std::optional<AttachMode> parseMode(std::string_view s)
{
    if (s == "native" || s == "drv")
        return AttachMode::Native;
    if (s == "skb" || s == "generic")
        return AttachMode::Skb;
    return std::nullopt;
}

// The mode to suggest when `m` is not supported.
constexpr AttachMode otherMode(AttachMode m) { return m == AttachMode::Native ? AttachMode::Skb : AttachMode::Native; }

} // namespace npf::ctl
