// Command-line arguments the programs share: the XDP
// mode. (What a user types that reaches the maps, ports, addresses and
// interface names, the dataplane parses itself: dataplane/flows.h, iface.h.)
#pragma once

#include <optional>
#include <string_view>

#include "dataplane/mode.h"

namespace npf::cli {

// "native" / "drv" / "skb" / "generic"; nullopt for anything else.
constexpr std::optional<dataplane::AttachMode> parseMode(std::string_view s)
{
    if (s == "native" || s == "drv")
        return dataplane::AttachMode::Native;
    if (s == "skb" || s == "generic")
        return dataplane::AttachMode::Skb;
    return std::nullopt;
}

} // namespace npf::cli
