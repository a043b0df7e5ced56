/* NPF_OPTS (npf/npf.h) as C and C++ compile it: header_compilers.sh builds
 * and runs this file as C99, C11 and C17 (-pedantic) with GCC and clang, -O0
 * and -O2, and as C++20 with g++ and clang++; the capi gtest builds it into
 * npf_capi_test too (C11). The struct NPF_OPTS declares has sz = its sizeof,
 * the fields named, and every other field zero; in GNU C every other byte
 * too, padding included, though the stack held other bytes before. Needs
 * only the header (no libnpf). */
#include <stdio.h>
#include <string.h>

#include "npf/npf.h"

#if defined(__GNUC__)
#define NPF_CHECK_NOINLINE __attribute__((noinline))
#else
#define NPF_CHECK_NOINLINE
#endif

static int failures;
#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: NPF_OPTS: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                      \
		}                                                                        \
	} while (0)

/* Leaves 0xa5 in the stack that the next call's frame takes. */
static NPF_CHECK_NOINLINE void dirty_stack(void)
{
	volatile unsigned char junk[4096];
	size_t i;

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = 0xa5;
}

/* Each declares with NPF_OPTS on a dirty stack and copies the bytes out as they are. */
static NPF_CHECK_NOINLINE void engine_opts(struct npf_engine_opts *out)
{
	NPF_OPTS(npf_engine_opts, o, .ifname = "eth0", .region_size = 64ull << 20, .flags = NPF_ENGINE_F_NO_UDP_CSUM,
		 .reserve = 8ull << 20);
	memcpy(out, &o, sizeof(o));
}

static NPF_CHECK_NOINLINE void client_opts(struct npf_client_opts *out)
{
	NPF_OPTS(npf_client_opts, o);
	memcpy(out, &o, sizeof(o));
}

static NPF_CHECK_NOINLINE void client_opts_last(struct npf_client_opts *out)
{
	NPF_OPTS(npf_client_opts, o, .timeout_ms = 7, .mode = NPF_CLIENT_MODE_DELEGATED);
	memcpy(out, &o, sizeof(o));
}

/* Whether every byte of a and b is the same (padding included), or, outside
 * GNU C, every field. */
static int same_engine(const struct npf_engine_opts *a, const struct npf_engine_opts *b)
{
#if defined(__GNUC__) && !defined(__cplusplus)
	return memcmp(a, b, sizeof(*a)) == 0;
#else
	return a->sz == b->sz && a->ifname == b->ifname && a->region_size == b->region_size &&
	       a->resident_budget == b->resident_budget && a->page_size == b->page_size && a->queues == b->queues &&
	       a->xdp_mode == b->xdp_mode && a->pager_threads == b->pager_threads && a->flags == b->flags &&
	       a->spill_dir == b->spill_dir && a->region_memory == b->region_memory && a->reserve == b->reserve;
#endif
}

static int same_client(const struct npf_client_opts *a, const struct npf_client_opts *b)
{
#if defined(__GNUC__) && !defined(__cplusplus)
	return memcmp(a, b, sizeof(*a)) == 0;
#else
	return a->sz == b->sz && a->socket == b->socket && a->name == b->name && a->region_size == b->region_size &&
	       a->resident_budget == b->resident_budget && a->page_size == b->page_size &&
	       a->timeout_ms == b->timeout_ms && a->mode == b->mode;
#endif
}

int npf_opts_check(void);
int npf_opts_check(void)
{
	struct npf_engine_opts e, want_e;
	struct npf_client_opts c, want_c;

	failures = 0;
	memset(&want_e, 0, sizeof(want_e));
	want_e.sz = sizeof(want_e);
	want_e.ifname = "eth0";
	want_e.region_size = 64ull << 20;
	want_e.flags = NPF_ENGINE_F_NO_UDP_CSUM;
	want_e.reserve = 8ull << 20;
	dirty_stack();
	engine_opts(&e);
	CHECK(e.sz == sizeof(struct npf_engine_opts));
	CHECK(e.ifname != NULL && strcmp(e.ifname, "eth0") == 0);
	want_e.ifname = e.ifname; /* the same literal, wherever the compiler put it */
	CHECK(same_engine(&e, &want_e));

	memset(&want_c, 0, sizeof(want_c));
	want_c.sz = sizeof(want_c);
	dirty_stack();
	client_opts(&c);
	CHECK(c.sz == sizeof(struct npf_client_opts));
	CHECK(same_client(&c, &want_c));
	want_c.timeout_ms = 7;
	want_c.mode = NPF_CLIENT_MODE_DELEGATED;
	dirty_stack();
	client_opts_last(&c);
	CHECK(same_client(&c, &want_c));

	/* The constants C callers compare with. */
	CHECK(NPF_FLOW_ID_NONE == 0xffffffffu && NPF_FLOW_ID_NONE >= NPF_MAX_FLOWS);
	CHECK(NPF_LOG_ERROR == 0 && NPF_LOG_TRACE == 4);
	return failures;
}

#ifdef NPF_OPTS_CHECK_MAIN
int main(void)
{
	const int n = npf_opts_check();

	if (n == 0)
		printf("NPF_OPTS: ok\n");
	return n == 0 ? 0 : 1;
}
#endif
