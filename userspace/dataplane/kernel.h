// The running kernel against what npf needs of it: one clear line instead
// of a verifier error on a kernel that is too old.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace npf::dataplane {

struct KernelVersion {
    unsigned major = 0, minor = 0;
    auto operator<=>(const KernelVersion&) const = default;
};

// What each kernel gives npf (the first loads npf_xdp; the rest are probed
// where they are used, and fall back without them).
inline constexpr KernelVersion kKernelMinimum{5, 18};  // XDP frags, bpf_xdp_get_buff_len
inline constexpr KernelVersion kKernelJumbo{6, 6};     // AF_XDP multi-buffer: datagrams over one frame
inline constexpr KernelVersion kKernelPagePool{6, 8};  // UFFDIO_MOVE: the 4 KiB page pool route

// "6.18.0-1-amd64" -> {6, 18}; nullopt when it does not start with N.N.
std::optional<KernelVersion> parseKernelRelease(std::string_view release);

// "" when `release` (uname -r) can run npf_xdp, else why not and what each
// version gives, in one line.
std::string kernelProblem(std::string_view release);

// Throws (EOPNOTSUPP) with kernelProblem() for the running kernel, if any.
void requireKernel();

} // namespace npf::dataplane
