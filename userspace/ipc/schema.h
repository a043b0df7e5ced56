// A message's fields, declared once: each field's JSON key, the member it
// fills and what decode accepts of it. encodeAs() and decodeAs() derive both
// directions from that one list (protocol.cpp, pods.cpp: schemaOf()), so a
// field cannot be written one way and read another.
//
// A field kind is a struct with put(const M&, Json&) (encode) and
// get(const Fields&, M&) (decode, failing through Fields with the key);
// what one list cannot say of a message (a field's bound set by another, a
// sum that must not overflow) a check(const Fields&, M&) overload of its
// own says, run after every field is read.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "ipc/fields.h"
#include "ipc/protocol.h"

namespace npf::ipc::schema {

// When a field is in the message.
enum class When {
    Required, // always written; decode fails when it is absent
    Optional, // always written; absent (or null) when decoded: the default stays
    Omitted,  // written only when not zero (or empty); absent: the default stays
};

template <typename M>
struct Tag {};

// An unsigned integer in [min, max], and a power of two when pow2.
template <typename M, typename T>
struct Uint {
    std::string_view key;
    T M::*member;
    uint64_t min = 0, max = std::numeric_limits<T>::max();
    When when = When::Required;
    bool pow2 = false;

    void put(const M& m, Json& j) const
    {
        if (when != When::Omitted || m.*member)
            j[std::string(key)] = m.*member;
    }
    void get(const Fields& f, M& m) const
    {
        const Json* v = f.find(key, when == When::Required);
        if (!v)
            return;
        const uint64_t n = f.number(key, *v, min, max);
        if (pow2 && !powerOfTwo(n))
            f.fail(key, "must be a power of two, got " + std::to_string(n));
        m.*member = static_cast<T>(n);
    }
};

template <typename M, typename T>
constexpr Uint<M, T> uint(std::string_view key, T M::*member, uint64_t min = 0,
                          uint64_t max = std::numeric_limits<T>::max(), When when = When::Required, bool pow2 = false)
{
    return {key, member, min, max, when, pow2};
}

// A uint64 that is there or not (std::optional): written when it holds one.
template <typename M>
struct MaybeUint {
    std::string_view key;
    std::optional<uint64_t> M::*member;

    void put(const M& m, Json& j) const
    {
        if (m.*member)
            j[std::string(key)] = *(m.*member);
    }
    void get(const Fields& f, M& m) const
    {
        m.*member = f.optU64(key, 0, std::numeric_limits<uint64_t>::max());
    }
};

// A string of at most `max` bytes that `valid` accepts (nullptr: any); a
// refused one is named with `problem` ("is not an interface name").
using TextRule = bool (*)(std::string_view) noexcept;

template <typename M>
struct Text {
    std::string_view key;
    std::string M::*member;
    size_t max;
    When when = When::Required;
    TextRule valid = nullptr;
    std::string_view problem = {};

    void put(const M& m, Json& j) const
    {
        if (when != When::Omitted || !(m.*member).empty())
            j[std::string(key)] = m.*member;
    }
    void get(const Fields& f, M& m) const
    {
        std::string s = f.str(key, max, when == When::Required);
        if (valid && !(when == When::Omitted && s.empty()) && !valid(s))
            f.fail(key, "'" + s + "' " + std::string(problem));
        m.*member = std::move(s);
    }
};

// A list of [min, max] strings, each a Text of its own (`canon`, when given,
// both checks an item and gives the form kept: "" refuses it).
template <typename M>
struct TextList {
    std::string_view key;
    std::vector<std::string> M::*member;
    size_t min, max, itemMax;
    TextRule valid = nullptr;
    std::string_view problem = {};
    std::string (*canon)(std::string_view) = nullptr;

    void put(const M& m, Json& j) const { j[std::string(key)] = m.*member; }
    void get(const Fields& f, M& m) const
    {
        const Json& a = f.array(key);
        if (a.size() < min || a.size() > max)
            f.fail(key, "must list " + std::to_string(min) + ".." + std::to_string(max) + " items, got " +
                            std::to_string(a.size()));
        for (const Json& v : a) {
            std::string s = f.text(key, v, itemMax);
            std::string kept = canon ? canon(s) : s;
            if ((valid && !valid(s)) || (canon && kept.empty()))
                f.fail(key, "'" + s + "' " + std::string(problem));
            (m.*member).push_back(std::move(kept));
        }
    }
};

// Any JSON object (a stats snapshot, read by its own parser).
template <typename M>
struct Object {
    std::string_view key;
    Json M::*member;

    void put(const M& m, Json& j) const { j[std::string(key)] = m.*member; }
    void get(const Fields& f, M& m) const { m.*member = f.object(key); }
};

// A schema: the message's name in errors, and its fields in order.
template <typename... F>
struct Schema {
    std::string_view what;
    std::tuple<F...> fields;
};

template <typename... F>
constexpr Schema<F...> fields(std::string_view what, F... f)
{
    return {what, {f...}};
}

// A struct of its own (Limits) as a nested object.
template <typename M, typename Sub, typename S>
struct Nested {
    std::string_view key;
    Sub M::*member;
    S sub; // Sub's schema
    When when = When::Required;

    void put(const M& m, Json& j) const
    {
        Json o = Json::object();
        std::apply([&](const auto&... f) { (f.put(m.*member, o), ...); }, sub.fields);
        j[std::string(key)] = std::move(o);
    }
    void get(const Fields& f, M& m) const
    {
        if (!f.find(key, when == When::Required))
            return;
        const Message inner{f.message().type, f.message().id, f.object(key)};
        const Fields g(inner, inner.type, sub.what);
        std::apply([&](const auto&... fl) { (fl.get(g, m.*member), ...); }, sub.fields);
    }
};

template <typename M, typename Sub, typename S>
constexpr Nested<M, Sub, S> nested(std::string_view key, Sub M::*member, S sub, When when = When::Required)
{
    return {key, member, sub, when};
}

// A struct of its own whose fields are the message's own (PodInfo in pod_add).
template <typename M, typename Sub, typename S>
struct Flat {
    Sub M::*member;
    S sub;

    void put(const M& m, Json& j) const
    {
        std::apply([&](const auto&... f) { (f.put(m.*member, j), ...); }, sub.fields);
    }
    void get(const Fields& f, M& m) const
    {
        std::apply([&](const auto&... fl) { (fl.get(f, m.*member), ...); }, sub.fields);
    }
};

template <typename M, typename Sub, typename S>
constexpr Flat<M, Sub, S> flat(Sub M::*member, S sub)
{
    return {member, sub};
}

// No check of its own: every rule is in the fields.
template <typename M>
void check(const Fields&, M&)
{
}

// {"type": M::kType, "id": id, ...its fields}.
template <typename M>
std::string encodeAs(const M& m, uint32_t id)
{
    Json j = Json::object();
    std::apply([&](const auto&... f) { (f.put(m, j), ...); }, schemaOf(Tag<M>{}).fields);
    return encodeMessage(M::kType, id, j);
}

// Every field read, then the message's own check.
template <typename M>
M decodeAs(const Message& msg)
{
    constexpr auto s = schemaOf(Tag<M>{});
    const Fields f(msg, M::kType, s.what);
    M m{};
    std::apply([&](const auto&... fl) { (fl.get(f, m), ...); }, s.fields);
    check(f, m);
    return m;
}

} // namespace npf::ipc::schema

// Defines message M's encode and decode (declared in its struct) as its
// schema's: one line a message, in the namespace of M and its schemaOf.
#define NPF_MESSAGE_CODEC(M)                                                           \
    std::string M::encode(uint32_t id) const { return schema::encodeAs(*this, id); } \
    M M::decode(const Message& m) { return schema::decodeAs<M>(m); }
