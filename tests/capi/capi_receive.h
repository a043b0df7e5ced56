/* The C side of the C API's end-to-end test (capi_receive.c, compiled as
 * C11): one engine, one flow, received from an epoll loop. The C++ test
 * builds the veth rig, sends, and checks the bytes through the callbacks. */
#ifndef NPF_TEST_CAPI_RECEIVE_H
#define NPF_TEST_CAPI_RECEIVE_H

#include <stddef.h>
#include <stdint.h>

#include "npf/npf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct capi_run {
	/* in */
	const char *ifname; /* in the caller's network namespace */
	uint16_t port;
	uint32_t count;     /* completions to receive */
	uint32_t slots;     /* buffers kept posted, `buf` bytes each, cookie 1000 + slot */
	uint32_t buf;
	uint32_t flags;     /* npf_engine_opts.flags */
	int deadline_ms;    /* for the whole run */
	void *arg;
	/* The flow is open and its buffers posted: start sending. */
	void (*ready)(void *arg);
	/* Each OK completion, in order, with its bytes: nonzero if they are wrong. */
	int (*check)(void *arg, const struct npf_completion *c, const uint8_t *bytes);
	/* Each completion has been handled (its buffer posted again). */
	void (*done)(void *arg);

	/* out */
	uint64_t ok, other_status, wrong_cookie, wrong_bytes, sleeps;
	int64_t populated;                 /* npf_populate of the buffers' first half */
	struct npf_flow_counters flow;     /* after the last completion */
	struct npf_ctx_counters engine;
	char error[512];                   /* what failed ("" if nothing) */
};

/* 0 once run->count completions arrived, or a negative errno (run->error). */
int capi_receive(struct capi_run *run);

#ifdef __cplusplus
}
#endif

#endif /* NPF_TEST_CAPI_RECEIVE_H */
