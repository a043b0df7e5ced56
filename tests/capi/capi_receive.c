/* The C API from C: an engine (its options declared with NPF_OPTS), a flow
 * with cookies, an epoll loop on its event fd with npf_flow_arm (never
 * npf_flow_wait while receiving), every buffer released and posted again
 * once checked. */
#define _POSIX_C_SOURCE 200809L

#include "capi_receive.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Records what failed (with the library's words) and returns rc. */
static int failed(struct capi_run *r, int rc, const char *what)
{
	snprintf(r->error, sizeof(r->error), "%s: %d (%s): %s", what, rc, strerror(-rc), npf_strerror_last());
	return rc;
}

static int consume(struct capi_run *r, npf_ctx *ctx, npf_flow_handle *f, const uint8_t *region,
		   const struct npf_completion *c)
{
	const uint64_t slot = c->offset / r->buf;
	int rc;

	if (c->cookie != 1000 + slot)
		r->wrong_cookie++;
	if (c->status != NPF_CS_OK)
		r->other_status++;
	else if (r->check(r->arg, c, region + c->offset))
		r->wrong_bytes++;
	else
		r->ok++;
	if ((rc = npf_release(ctx, c->offset, r->buf)) < 0)
		return failed(r, rc, "npf_release");
	if ((rc = npf_flow_post(f, c->offset, r->buf, c->cookie)) < 0)
		return failed(r, rc, "npf_flow_post (again)");
	return 0;
}

/* poll until empty, arm, sleep in epoll_wait: until run->count completions. */
static int receive(struct capi_run *r, npf_ctx *ctx, npf_flow_handle *f, const uint8_t *region, int ep)
{
	const int64_t end = now_ms() + r->deadline_ms;
	uint64_t got = 0;
	struct npf_completion c[64];

	while (got < r->count) {
		int n, i, rc;
		struct epoll_event ev;
		const int64_t left = end - now_ms();

		while ((n = npf_flow_poll(f, c, 64)) > 0) {
			for (i = 0; i < n; i++) {
				if ((rc = consume(r, ctx, f, region, &c[i])) < 0)
					return rc;
				r->done(r->arg);
			}
			got += (uint64_t)n;
		}
		if (n < 0)
			return failed(r, n, "npf_flow_poll");
		if (got >= r->count)
			break;
		if ((n = npf_flow_arm(f)) < 0)
			return failed(r, n, "npf_flow_arm");
		if (n > 0)
			continue; /* ready already: not armed */
		if (left <= 0) {
			snprintf(r->error, sizeof(r->error), "deadline: %llu of %u completions (%llu sleeps)",
				 (unsigned long long)got, r->count, (unsigned long long)r->sleeps);
			return -ETIMEDOUT;
		}
		r->sleeps++;
		if (epoll_wait(ep, &ev, 1, (int)left) < 0 && errno != EINTR)
			return failed(r, -errno, "epoll_wait");
	}
	return 0;
}

static int run_flow(struct capi_run *r, npf_ctx *ctx, npf_flow_handle *f)
{
	uint64_t size = 0;
	const uint8_t *region = npf_region(ctx, &size);
	struct npf_completion c[4];
	struct epoll_event ev;
	char why[256];
	uint32_t i;
	int ep, rc;

	if (!region || size < (uint64_t)r->slots * r->buf) {
		snprintf(r->error, sizeof(r->error), "region of %llu bytes at %p", (unsigned long long)size,
			 (const void *)region);
		return -EINVAL;
	}
	if (npf_flow_port(f) != r->port || npf_flow_id(f) >= NPF_MAX_FLOWS) {
		snprintf(r->error, sizeof(r->error), "flow port %u id %u", npf_flow_port(f), npf_flow_id(f));
		return -EINVAL;
	}
	r->populated = npf_populate(ctx, 0, (uint64_t)r->slots / 2 * r->buf);
	if (r->populated < 0)
		return failed(r, (int)r->populated, "npf_populate");
	for (i = 0; i < r->slots; i++)
		if ((rc = npf_flow_post(f, (uint64_t)i * r->buf, r->buf, 1000 + i)) < 0)
			return failed(r, rc, "npf_flow_post");
	npf_flow_flush(f);
	if (npf_flow_outstanding(f) != r->slots) {
		snprintf(r->error, sizeof(r->error), "%llu outstanding after %u posts",
			 (unsigned long long)npf_flow_outstanding(f), r->slots);
		return -EINVAL;
	}
	/* Nothing sent yet: a timeout, not a failure. */
	if ((rc = npf_flow_wait(f, c, 4, 10)) != 0)
		return rc < 0 ? failed(r, rc, "npf_flow_wait") : -EPROTO;
	if ((rc = npf_flow_failure(f, why, sizeof(why))) != 0 || (rc = npf_ctx_failure(ctx, why, sizeof(why))) != 0) {
		snprintf(r->error, sizeof(r->error), "failure while served: %d '%s'", rc, why);
		return -EINVAL;
	}

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return failed(r, -errno, "epoll_create1");
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, npf_flow_event_fd(f), &ev) != 0) {
		rc = failed(r, -errno, "epoll_ctl on npf_flow_event_fd");
		close(ep);
		return rc;
	}
	r->ready(r->arg);
	rc = receive(r, ctx, f, region, ep);
	close(ep);
	if (rc < 0)
		return rc;

	r->flow.sz = sizeof(r->flow);
	if ((rc = npf_flow_read_counters(f, &r->flow)) < 0)
		return failed(r, rc, "npf_flow_read_counters");
	r->engine.sz = sizeof(r->engine);
	if ((rc = npf_ctx_read_counters(ctx, &r->engine)) < 0)
		return failed(r, rc, "npf_ctx_read_counters");
	return 0;
}

int capi_receive(struct capi_run *r)
{
	NPF_OPTS(npf_engine_opts, o, .ifname = r->ifname, .region_size = 16ull << 20, .flags = r->flags);
	npf_ctx *ctx = NULL;
	npf_flow_handle *f = NULL;
	int rc;

	r->error[0] = '\0';
	if ((rc = npf_engine_open(&o, &ctx)) < 0)
		return failed(r, rc, "npf_engine_open");
	if ((rc = npf_flow_open(ctx, r->port, NULL, NULL, &f)) < 0) {
		failed(r, rc, "npf_flow_open");
		npf_ctx_close(ctx);
		return rc;
	}
	rc = run_flow(r, ctx, f);
	{
		const int closed = npf_flow_close(f);
		if (closed < 0 && rc == 0)
			rc = failed(r, closed, "npf_flow_close");
	}
	npf_ctx_close(ctx);
	return rc;
}
