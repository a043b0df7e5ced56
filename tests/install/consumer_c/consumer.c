/* A client of npfd written against the C API alone (C11), built in this
 * tree (tests/capi, target capi_client) and outside it, against an installed
 * libnpf (this directory's CMakeLists.txt, a C-only project) found with
 * pkg-config (tests/install/consumer_c.sh) or find_package(npf)
 * (tests/install/install_tree.sh):
 *
 *   consumer SOCKET PORT COUNT OUT [--ready-fd FD]
 *
 * connects to npfd, opens the flow of PORT, posts COUNT buffers (cookie =
 * buffer index), writes "ready\n" to FD, then receives COUNT datagrams from an
 * epoll loop (npf_flow_event_fd + npf_flow_arm) and writes their bytes to OUT
 * in order. Exit 0, or 1 with what failed on stderr. COUNT is at most
 * NPF_POST_RING_SIZE: every datagram has a buffer of its own, so a sender
 * needs no flow control. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "npf/npf.h"

#define BUF 2048u
#define DEADLINE_MS 30000

static int failed(const char *what, int rc)
{
	fprintf(stderr, "consumer: %s: %s (%s)\n", what, npf_strerror_last(), strerror(-rc));
	return 1;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		const ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The epoll loop: poll until empty, arm, sleep. */
static int receive(npf_ctx *ctx, npf_flow_handle *f, uint32_t count, int out)
{
	const uint8_t *region = npf_region(ctx, NULL);
	struct npf_completion c[64];
	struct epoll_event ev;
	uint32_t got = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC), n, i, rc;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, npf_flow_event_fd(f), &ev) != 0) {
		perror("consumer: epoll on npf_flow_event_fd");
		return 1;
	}
	while (got < count) {
		while ((n = npf_flow_poll(f, c, 64)) > 0) {
			for (i = 0; i < n; i++, got++) {
				if (c[i].status != NPF_CS_OK || c[i].cookie != got || c[i].offset != (uint64_t)got * BUF) {
					fprintf(stderr, "consumer: completion %u: status %u cookie %llu offset %llu\n",
						got, c[i].status, (unsigned long long)c[i].cookie,
						(unsigned long long)c[i].offset);
					return 1;
				}
				if (write_all(out, region + c[i].offset, c[i].len) != 0) {
					perror("consumer: write");
					return 1;
				}
				if ((rc = npf_release(ctx, c[i].offset, BUF)) < 0)
					return failed("npf_release", rc);
			}
		}
		if (n < 0)
			return failed("npf_flow_poll", n);
		if (got >= count)
			break;
		if ((n = npf_flow_arm(f)) < 0)
			return failed("npf_flow_arm", n);
		if (n == 0 && epoll_wait(ep, &ev, 1, DEADLINE_MS) == 0) {
			fprintf(stderr, "consumer: nothing for %d ms after %u of %u datagrams\n", DEADLINE_MS, got,
				count);
			return 1;
		}
	}
	close(ep);
	return 0;
}

int main(int argc, char **argv)
{
	npf_ctx *ctx = NULL;
	npf_flow_handle *f = NULL;
	uint32_t count, i;
	int out, ready = -1, rc, status;

	if (argc != 5 && !(argc == 7 && strcmp(argv[5], "--ready-fd") == 0)) {
		fprintf(stderr, "usage: consumer SOCKET PORT COUNT OUT [--ready-fd FD]\n");
		return 2;
	}
	if (argc == 7)
		ready = atoi(argv[6]);
	count = (uint32_t)strtoul(argv[3], NULL, 10);
	if (count == 0 || count > NPF_POST_RING_SIZE) {
		fprintf(stderr, "consumer: COUNT must be 1..%u\n", NPF_POST_RING_SIZE);
		return 2;
	}
	out = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		perror(argv[4]);
		return 1;
	}

	{
		/* The whole region resident: write(2) reads the received bytes in
		 * the kernel, which cannot fault an evicted page of a client's
		 * region back in (its userfaultfd is user-mode only): EFAULT. npfd's
		 * default budget, the rule's fair share, may be less. */
		const uint64_t size = ((uint64_t)count * BUF + 4095) / 4096 * 4096;
		NPF_OPTS(npf_client_opts, o, .socket = argv[1], .name = "npf-consumer-c", .region_size = size,
			 .resident_budget = size);
		if ((rc = npf_client_open(&o, &ctx)) < 0)
			return failed("npf_client_open", rc);
	}
	if ((rc = npf_flow_open(ctx, (uint16_t)atoi(argv[2]), NULL, NULL, &f)) < 0) {
		npf_ctx_close(ctx);
		return failed("npf_flow_open", rc);
	}
	for (i = 0; i < count; i++)
		if ((rc = npf_flow_post(f, (uint64_t)i * BUF, BUF, i)) < 0)
			return failed("npf_flow_post", rc);
	npf_flow_flush(f);
	if (ready >= 0 && (write(ready, "ready\n", 6) != 6 || close(ready) != 0)) {
		perror("consumer: ready fd");
		return 1;
	}

	status = receive(ctx, f, count, out);
	if ((rc = npf_flow_close(f)) < 0 && status == 0)
		status = failed("npf_flow_close", rc);
	npf_ctx_close(ctx);
	if (close(out) != 0) {
		perror(argv[4]);
		return 1;
	}
	return status;
}
