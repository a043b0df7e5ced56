// dataplane::mapShape: a map's shape read from /proc/self/fdinfo (what an
// npfd client checks the post ring map with, no bpf(2) call) agrees with
// the kernel's own info for a real post ring map and a plain one, and a
// descriptor that is not a map is refused.
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "dataplane/bpf_info.h"
#include "dataplane/flow_ring.h"
#include "sys/error.h"
#include "sys/fd.h"

namespace npf::dataplane {
namespace {

void expectSameShape(int fd)
{
    const bpf_map_info kernel = mapInfo(fd, "map");
    const bpf_map_info shape = mapShape(fd, "map");
    EXPECT_EQ(shape.type, kernel.type);
    EXPECT_EQ(shape.key_size, kernel.key_size);
    EXPECT_EQ(shape.value_size, kernel.value_size);
    EXPECT_EQ(shape.max_entries, kernel.max_entries);
    EXPECT_EQ(shape.map_flags, kernel.map_flags);
}

TEST(MapShape, AgreesWithTheKernelsInfo)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root (creating BPF maps)";
    FlowRing ring = FlowRing::create(7, 0);
    expectSameShape(ring.fd());
    EXPECT_NE(mapShape(ring.fd(), "ring").map_flags & BPF_F_MMAPABLE, 0u);

    Fd hash(bpf_map_create(BPF_MAP_TYPE_HASH, "npf_shape_t", 8, 24, 100, nullptr));
    ASSERT_TRUE(hash) << strerror(errno);
    expectSameShape(hash.get());
}

TEST(MapShape, RefusesADescriptorThatIsNotAMap)
{
    Fd ev(::eventfd(0, EFD_CLOEXEC));
    ASSERT_TRUE(ev);
    EXPECT_THROW(mapShape(ev.get(), "an eventfd"), StateError);
    EXPECT_THROW(FlowRing::adopt(std::move(ev)), StateError);
}

} // namespace
} // namespace npf::dataplane
