// What userfaultfd this process may create, on stderr (npfd_caps_test runs
// it confined exactly as it runs npfd): "full: ok" or "full: refused: WHY",
// then "user-mode-only: ok" or "user-mode-only: refused: WHY". Exit 0.
#include <linux/userfaultfd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "region/uffd.h"

int main()
{
    std::string why;
    if (npf::userfaultfdAvailable(&why))
        std::fprintf(stderr, "full: ok\n");
    else
        std::fprintf(stderr, "full: refused: %s\n", why.c_str());
    try {
        (void)npf::Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM, 0, "the probe", UFFD_USER_MODE_ONLY);
        std::fprintf(stderr, "user-mode-only: ok\n");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "user-mode-only: refused: %s\n", e.what());
    }
    return 0;
}
