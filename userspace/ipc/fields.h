// Typed, bounded reads of a received message's fields, shared by the
// protocols npfd speaks (protocol.h with its clients, pods.h with npf-cni):
// every failure is a ProtocolError(BadMessage) naming the message and the
// field.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "ipc/protocol.h"

namespace npf::ipc {

bool hasControl(std::string_view s) noexcept; // a byte below 0x20, or 0x7f
bool validAddr(const std::string& s) noexcept; // "" or IPv4 or IPv6 text of at most kMaxAddr bytes
bool powerOfTwo(uint64_t v) noexcept;
// Throws BadMessage unless m.type is `type`.
void expectType(const Message& m, std::string_view type, std::string_view what);

// Typed, bounded reads of one message's fields; every failure names the
// message and the field.
class Fields {
public:
    Fields(const Message& m, std::string_view type, std::string_view what) : m_(m), what_(what)
    {
        expectType(m, type, what);
    }

    const Message& message() const noexcept { return m_; }

    [[noreturn]] void fail(std::string_view key, const std::string& problem) const
    {
        throw ProtocolError(ErrorCode::BadMessage,
                            std::string(what_) + ": \"" + std::string(key) + "\": " + problem, 0, m_.id);
    }

    // The field, or nullptr when it is absent (or null, for optional ones).
    const Json* find(std::string_view key, bool required) const
    {
        auto it = m_.body.find(key);
        if (it == m_.body.end() || (!required && it->is_null())) {
            if (required)
                fail(key, "missing");
            return nullptr;
        }
        return &*it;
    }

    uint64_t number(std::string_view key, const Json& v, uint64_t min, uint64_t max) const
    {
        if (!v.is_number_unsigned())
            fail(key, "must be an unsigned integer, got " + describeValue(v));
        uint64_t n = v.get<uint64_t>();
        if (n < min || n > max)
            fail(key, "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " +
                          std::to_string(n));
        return n;
    }

    uint64_t u64(std::string_view key, uint64_t min = 0,
                 uint64_t max = std::numeric_limits<uint64_t>::max()) const
    {
        return number(key, *find(key, true), min, max);
    }

    uint32_t u32(std::string_view key, uint32_t min = 0,
                 uint32_t max = std::numeric_limits<uint32_t>::max()) const
    {
        return static_cast<uint32_t>(u64(key, min, max));
    }

    std::optional<uint64_t> optU64(std::string_view key, uint64_t min, uint64_t max) const
    {
        const Json* v = find(key, false);
        if (!v)
            return std::nullopt;
        return number(key, *v, min, max);
    }

    std::string text(std::string_view key, const Json& v, size_t max) const
    {
        if (!v.is_string())
            fail(key, "must be a string, got " + describeValue(v));
        const std::string& s = v.get_ref<const std::string&>();
        if (s.size() > max)
            fail(key, "longer than " + std::to_string(max) + " bytes (" + std::to_string(s.size()) + ")");
        return s;
    }

    std::string str(std::string_view key, size_t max, bool required) const
    {
        const Json* v = find(key, required);
        return v ? text(key, *v, max) : std::string();
    }

    const Json& object(std::string_view key) const
    {
        const Json& v = *find(key, true);
        if (!v.is_object())
            fail(key, "must be an object, got " + describeValue(v));
        return v;
    }

    const Json& array(std::string_view key) const
    {
        const Json& v = *find(key, true);
        if (!v.is_array())
            fail(key, "must be an array, got " + describeValue(v));
        return v;
    }

private:
    const Message& m_;
    std::string_view what_;
};

} // namespace npf::ipc
