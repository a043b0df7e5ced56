// dataplane::parseFlowSpec on arbitrary text: the port is the input up to the first
// newline, the address the rest (NULs included). A port is 1 .. 5 decimal
// digits with a value 1 .. 65535; an accepted address is IPv4 or IPv6, not
// unspecified, and survives a round trip through its text and the BPF key.
// Every rejection is an ArgumentError; no other exception.
#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "dataplane/flows.h"
#include "fuzz_check.h"
#include "sys/error.h"

namespace {

bool referencePort(const std::string& s, uint16_t* port)
{
    if (s.empty() || s.size() > 5)
        return false;
    uint32_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + uint32_t(c - '0');
    }
    *port = uint16_t(v);
    return v >= 1 && v <= 65535;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string in(reinterpret_cast<const char*>(data), size);
    const size_t nl = in.find('\n');
    const std::string port = in.substr(0, nl), addr = nl == std::string::npos ? "" : in.substr(nl + 1);

    uint16_t wantPort = 0;
    const bool portOk = referencePort(port, &wantPort);
    try {
        NPF_FUZZ_CHECK(npf::dataplane::parsePort(port) == wantPort && portOk, "parsePort accepted a bad port");
    } catch (const npf::ArgumentError&) {
        NPF_FUZZ_CHECK(!portOk, "parsePort refused port %u", wantPort);
    }

    npf::dataplane::FlowSpec f;
    try {
        f = npf::dataplane::parseFlowSpec(port, addr);
    } catch (const npf::ArgumentError&) {
        return 0;
    }
    NPF_FUZZ_CHECK(portOk && f.port == wantPort, "flow spec with port %u from a bad port", f.port);
    if (addr.empty()) {
        NPF_FUZZ_CHECK(f.family == NPF_FAMILY_ANY && f.addr == decltype(f.addr){}, "no address, but family %u",
                       f.family);
    } else {
        NPF_FUZZ_CHECK(f.family == NPF_FAMILY_IPV4 || f.family == NPF_FAMILY_IPV6, "family %u", f.family);
        NPF_FUZZ_CHECK(addr.find('\0') == std::string::npos, "address with a NUL accepted as %s",
                       npf::dataplane::addrString(f).c_str());
        // What inet_pton makes of the whole text is what was accepted.
        uint8_t raw[16] = {};
        NPF_FUZZ_CHECK(inet_pton(f.family == NPF_FAMILY_IPV4 ? AF_INET : AF_INET6, addr.c_str(), raw) == 1 &&
                           std::memcmp(raw, f.addr.data(), f.family == NPF_FAMILY_IPV4 ? 4 : 16) == 0,
                       "address differs from inet_pton's");
        bool zero = true;
        for (uint8_t b : f.addr)
            zero = zero && b == 0;
        NPF_FUZZ_CHECK(!zero, "unspecified address accepted");
    }
    const std::string text = npf::dataplane::addrString(f);
    NPF_FUZZ_CHECK(npf::dataplane::parseFlowSpec(std::to_string(f.port), text) == f, "round trip through '%s' differs",
                   text.c_str());
    NPF_FUZZ_CHECK(npf::dataplane::fromKey(npf::dataplane::toKey(f)) == f, "round trip through the BPF key differs");
    NPF_FUZZ_CHECK(npf::dataplane::toString(f).find("port " + std::to_string(f.port)) != std::string::npos, "toString");
    return 0;
}
