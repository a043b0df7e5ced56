#include "ipc/fields.h"

#include <arpa/inet.h>

namespace npf::ipc {

bool hasControl(std::string_view s) noexcept
{
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f)
            return true;
    return false;
}

bool validAddr(const std::string& s) noexcept
{
    if (s.empty())
        return true;
    unsigned char buf[16];
    return s.size() <= kMaxAddr &&
           (::inet_pton(AF_INET, s.c_str(), buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), buf) == 1);
}

bool powerOfTwo(uint64_t v) noexcept { return v && !(v & (v - 1)); }

void expectType(const Message& m, std::string_view type, std::string_view what)
{
    if (m.type != type)
        throw ProtocolError(ErrorCode::BadMessage,
                            std::string(what) + ": expected type '" + std::string(type) + "', got '" + m.type + "'",
                            0, m.id);
}

} // namespace npf::ipc
