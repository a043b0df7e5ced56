#include "dataplane/kernel.h"

#include <sys/utsname.h>

#include <cerrno>
#include <charconv>

#include "sys/error.h"

namespace npf::dataplane {
namespace {

std::string text(KernelVersion v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

// The number at the start of `s`, and `s` past it; nullopt if none.
std::optional<unsigned> number(std::string_view& s)
{
    unsigned n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || end == s.data())
        return std::nullopt;
    s.remove_prefix(size_t(end - s.data()));
    return n;
}

} // namespace

std::optional<KernelVersion> parseKernelRelease(std::string_view release)
{
    std::string_view s = release;
    const std::optional<unsigned> major = number(s);
    if (!major || s.empty() || s.front() != '.')
        return std::nullopt;
    s.remove_prefix(1);
    const std::optional<unsigned> minor = number(s);
    if (!minor)
        return std::nullopt;
    return KernelVersion{*major, *minor};
}

std::string kernelProblem(std::string_view release)
{
    const std::optional<KernelVersion> v = parseKernelRelease(release);
    const std::string needs = "npf needs Linux " + text(kKernelMinimum) +
                              " or later to load npf_xdp (XDP frags, bpf_xdp_get_buff_len); " + text(kKernelJumbo) +
                              " for datagrams larger than one frame (AF_XDP multi-buffer), " +
                              text(kKernelPagePool) + " for the 4 KiB page pool (UFFDIO_MOVE)";
    if (!v)
        return "kernel release '" + std::string(release) + "' is not a version this check can read: " + needs;
    if (*v < kKernelMinimum)
        return "kernel " + std::string(release) + " is too old: " + needs;
    return "";
}

void requireKernel()
{
    utsname u{};
    if (::uname(&u) != 0)
        throwErrno("uname");
    // A release this check cannot read is let through: the verifier has the last word.
    if (!parseKernelRelease(u.release))
        return;
    if (std::string why = kernelProblem(u.release); !why.empty())
        throwErrno(EOPNOTSUPP, why);
}

} // namespace npf::dataplane
