/*
 * libnpf's C API: receive UDP datagrams into pageable, unpinned memory, from
 * C (C99 or later) or any language with a C FFI. A thin layer over the C++
 * API (npf/engine.h, npf/client.h): the same engine, client and flows, the
 * same rules; read those headers for what each call does in depth.
 *
 *   NPF_OPTS(npf_engine_opts, o, .ifname = "eth0", .region_size = 64ull << 20);
 *   npf_ctx *ctx;
 *   npf_flow_handle *f;
 *   if (npf_engine_open(&o, &ctx) < 0 || npf_flow_open(ctx, 9000, NULL, NULL, &f) < 0)
 *       fprintf(stderr, "npf: %s\n", npf_strerror_last());
 *   npf_flow_post(f, 0, 2048, 42);             // [0, 2048) of npf_region(ctx, NULL), cookie 42
 *   struct npf_completion c[64];
 *   int n = npf_flow_wait(f, c, 64, 100);      // in seq order, bytes in place
 *
 * Back ends. An npf_ctx is either an in-process engine on one interface
 * (npf_engine_open: needs privileges, see below) or a connection to npfd, the
 * npf daemon (npf_client_open: needs none). Everything else is the same for
 * both.
 *
 * Errors. Functions return 0 (or a count) on success and a negative errno on
 * failure, and a failure also sets errno to that errno (positive), as libbpf
 * does: `if (npf_flow_post(...) < 0) perror("post")` works too. A success
 * leaves errno as the caller had it, whatever system calls libnpf made on the
 * way. npf_strerror_last() says what failed in words (the message is the
 * calling thread's own and stays until its next failure). The few calls that
 * cannot return an errno (npf_region, npf_flow_outstanding, npf_flow_port,
 * npf_flow_id) return a value no context or flow can have for a NULL one,
 * with errno EINVAL and words, as each says. No C++ exception crosses this
 * API. Results of the flow calls:
 *   -EINVAL  a NULL handle or argument, a size or buffer out of range
 *   -EAGAIN  npf_flow_post: NPF_POST_RING_SIZE buffers are outstanding
 *   -ENODEV  the interface is gone (in-process engine)
 *   -EPIPE   npfd is gone or dropped the connection (npfd client)
 *   -EPROTO  the completion ring was found corrupt (npfd client)
 * Completions already in the ring are returned before -ENODEV / -EPIPE /
 * -EPROTO; after one of them nothing more arrives: close the flow (the
 * content of buffers completed so far stays in the region).
 *
 * Ownership. npf_engine_open / npf_client_open hand out a context that
 * npf_ctx_close frees; npf_flow_open hands out a flow that npf_flow_close
 * frees, and npf_ctx_close frees every flow of the context still open. The
 * region (npf_region) belongs to the context and is unmapped by npf_ctx_close.
 * The strings of an options struct are copied: they need not outlive the
 * call. npf_strerror_last's string belongs to the library.
 *
 * Threads. A flow's npf_flow_post, _flush, _poll, _wait and _arm belong to one
 * thread at a time (the flow's owner; hand it over with your own
 * synchronisation). The other npf_flow_* calls and the npf_ctx calls
 * (npf_region, npf_release, npf_populate, npf_ctx_read_counters, npf_flow_open)
 * may be called from any thread, concurrently. npf_flow_close(f) and
 * npf_ctx_close(ctx) may not run while another thread uses f (or any flow of
 * ctx) or is inside one of its calls.
 *
 * Privileges. An engine needs CAP_NET_ADMIN, CAP_BPF (or CAP_SYS_ADMIN) and
 * CAP_PERFMON to attach npf_xdp, CAP_NET_RAW to create the AF_XDP sockets,
 * CAP_IPC_LOCK (or a large enough RLIMIT_MEMLOCK) for its pinned UMEM, and
 * CAP_SYS_PTRACE or access to /dev/userfaultfd for the region's userfaultfd
 * when vm.unprivileged_userfaultfd is 0; root has them. One engine per interface
 * and network namespace on the machine. A client of npfd needs no privilege:
 * a uid/gid npfd's config admits, and the userfaultfd system call (user mode
 * only) allowed by any seccomp profile.
 *
 * Event loops (epoll, poll, select, io_uring POLL_ADD). npf_flow_event_fd(f)
 * becomes readable after npf_flow_arm(f) when the next completion is ready or
 * the flow fails. npf_flow_arm asks for that one signal and returns 0 (armed:
 * sleep on the fd), > 0 (completions are ready now, not armed: poll them,
 * then arm again) or < 0 (the flow failed). No wake-up is lost between a poll
 * that found nothing and the arm; a spurious wake-up is possible (the poll
 * then returns 0: arm again). With the fd registered in epoll once
 * (level-triggered, EPOLLIN):
 *
 *   for (;;) {
 *       int n;
 *       while ((n = npf_flow_poll(f, c, 64)) > 0)
 *           consume(c, n);
 *       if (n < 0 || (n = npf_flow_arm(f)) < 0)
 *           break;                                 // failed: npf_strerror_last()
 *       if (n == 0)
 *           epoll_wait(ep, ev, 16, -1);            // armed
 *   }
 *
 * npf_flow_wait does the same by itself; do not mix the two on one flow at once.
 *
 * ABI stability. The SONAME (libnpf.so.0 now) changes whenever a release
 * breaks the binary interface, C or C++; while libnpf's major version is 0 a
 * minor release may do so (and the source API may change with it). Within
 * one SONAME: functions are only added, each under the symbol version of the
 * release that added it (NPF_0.1: every function of this header so far;
 * libnpf/libnpf.map), so that a program needing a newer function fails to
 * load on an older libnpf, naming the version, instead of failing at the
 * call; the option and counter structs only grow (see "Versioned structs");
 * handles stay opaque. struct npf_completion and the NPF_* constants come
 * from npf/abi.h (NPF_ABI_VERSION).
 *
 * Versioned structs (npf_engine_opts, npf_client_opts, npf_flow_counters,
 * npf_ctx_counters). Each starts with `sz`, which the caller sets to sizeof
 * the struct it was compiled with. Declare an options struct with NPF_OPTS
 * (below): it sets sz and zeroes the rest (padding too, where the compiler
 * allows); name only what you need: every zero field means the default.
 * What the library does with sz:
 *   - less than the first version's struct (npf_engine_opts: up to and
 *     including spill_dir; the others: the whole struct as it is now):
 *     -EINVAL
 *   - an older caller's smaller struct: read up to sz; the fields past it
 *     get their default (0)
 *   - a newer caller's larger options struct: accepted when every byte past
 *     this library's sizeof is zero; otherwise -E2BIG, and
 *     npf_strerror_last() names the first non-zero byte: an option this
 *     library cannot honour is never silently dropped
 *   - counters: the library writes what fits in sz and zeroes the bytes past
 *     its own struct; sz stays as the caller set it.
 * Each version of an options struct ends with `size_t :0;`. A later version
 * adds its fields after that marker, and a marker after them: the zero-width
 * bit-field starts them on a size_t boundary, past the tail padding of the
 * version before (which a library of that version copies without looking),
 * so they fall in the bytes such a library checks. The counters structs have
 * no tail padding (every field after sz is 8 bytes).
 */
#ifndef NPF_NPF_H
#define NPF_NPF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "npf/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An engine or a connection to npfd, with its region. */
typedef struct npf_ctx npf_ctx;
/* One flow of a context: a UDP destination whose datagrams land in posted
 * buffers. (Not `struct npf_flow`: that is the flows map's value in npf/abi.h.) */
typedef struct npf_flow_handle npf_flow_handle;

/* The calling thread's message for its last failure ("" if none yet). */
const char *npf_strerror_last(void);

/* NPF_OPTS(TYPE, NAME, ...) declares `struct TYPE NAME`, an options struct of
 * this header, with sz = sizeof(struct TYPE), the designated initializers
 * given (in C++, in the order of the struct's fields) and everything else
 * zero, at block scope; like libbpf's LIBBPF_OPTS:
 *
 *   NPF_OPTS(npf_client_opts, o, .name = "app", .timeout_ms = 2000);
 *   NPF_OPTS(npf_client_opts, defaults);
 *
 * GNU C (GCC, clang) zeroes the whole struct first (memset), then assigns a
 * compound literal, so that the padding stays zero as far as the compiler
 * allows; other C compilers and C++20 initialise it with the list (the
 * fields not named are zero; in C++ with GCC's -Wmissing-field-initializers
 * silenced for the declaration). */
#define NPF_OPTS(TYPE, ...) NPF_OPTS_(TYPE, __VA_ARGS__, )
#if defined(__cplusplus) && defined(__GNUC__)
#define NPF_OPTS_(TYPE, NAME, ...)                                                  \
	_Pragma("GCC diagnostic push")                                               \
	_Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")           \
	struct TYPE NAME = {.sz = sizeof(struct TYPE), __VA_ARGS__};                 \
	_Pragma("GCC diagnostic pop")                                                \
	static_assert(sizeof(struct TYPE) > sizeof(size_t), "NPF_OPTS: an options struct")
#elif defined(__cplusplus)
#define NPF_OPTS_(TYPE, NAME, ...) struct TYPE NAME = {.sz = sizeof(struct TYPE), __VA_ARGS__}
#elif defined(__GNUC__)
#define NPF_OPTS_(TYPE, NAME, ...)                                                  \
	struct TYPE NAME = __extension__({                                           \
		__builtin_memset(&NAME, 0, sizeof(struct TYPE));                      \
		(struct TYPE){.sz = sizeof(struct TYPE), __VA_ARGS__};                \
	})
#else
#define NPF_OPTS_(TYPE, NAME, ...) struct TYPE NAME = (struct TYPE){.sz = sizeof(struct TYPE), __VA_ARGS__}
#endif

/* ---- contexts -------------------------------------------------------- */

/* npf_engine_opts.xdp_mode: how the engine attaches npf_xdp (when `npfctl
 * attach` has not already). */
#define NPF_XDP_NATIVE 0
#define NPF_XDP_SKB    1

/* npf_engine_opts.flags */
/* Do not verify the UDP checksum of each datagram: only for a trusted source
 * that sends partial checksums (a veth peer with tx checksum offload on). */
#define NPF_ENGINE_F_NO_UDP_CSUM   0x1u
/* The pagers spin instead of sleeping: faults are picked up in microseconds;
 * give each pager a core of its own. */
#define NPF_ENGINE_F_PAGER_BUSY_POLL 0x2u
/* Run to completion: no worker threads; npf_flow_poll, npf_flow_wait and
 * npf_flow_arm run the fast path on the calling thread, and the flow's event
 * fd is readable when datagrams wait for it too (npf::EngineConfig::
 * runToCompletion). */
#define NPF_ENGINE_F_RUN_TO_COMPLETION 0x4u

/* npf_engine_opts.region_memory: where the region's pages come from
 * (npf::RegionMemory; docs/architecture.md, "Where a region's pages come
 * from"). */
/* 4 KiB pages: ANON. 2 MiB pages: a page pool where the kernel has
 * UFFDIO_MOVE (Linux 6.8) and transparent huge pages, else a memfd. */
#define NPF_REGION_MEMORY_AUTO  0
/* Private memory and a pool of pages moved in and out: nothing allocated
 * once the pool is warm. 2 MiB pages are transparent huge pages. */
#define NPF_REGION_MEMORY_POOL  1
/* A memfd: a fresh shmem page per install, or hugetlbfs for 2 MiB pages. */
#define NPF_REGION_MEMORY_MEMFD 2
/* Private memory, 4 KiB pages: each install copies a page in (the kernel
 * takes it off its free lists), each eviction frees it. */
#define NPF_REGION_MEMORY_ANON  3

/* The in-process engine's options (npf::EngineConfig's common ones). */
struct npf_engine_opts {
	size_t sz;                /* sizeof(struct npf_engine_opts) */
	const char *ifname;       /* the interface; required */
	uint64_t region_size;     /* bytes of receive memory, a multiple of page_size; 0 = 1 GiB */
	uint64_t resident_budget; /* bytes the region may keep resident; 0 = unlimited */
	uint64_t page_size;       /* 4096 or 2 MiB (see region_memory); 0 = 4096 */
	uint32_t queues;          /* RX queues to serve; 0 = all */
	uint32_t xdp_mode;        /* NPF_XDP_NATIVE or NPF_XDP_SKB */
	uint32_t pager_threads;   /* 0 = 1 */
	uint32_t flags;           /* NPF_ENGINE_F_* */
	/* Where evicted content is saved (an unlinked file in this directory);
	 * NULL = /var/tmp, "" = a memfd (evicted content stays in RAM). */
	const char *spill_dir;
	/* Added after the first C API, which ended at spill_dir: a caller built
	 * against that passes the smaller sz and gets NPF_REGION_MEMORY_AUTO. */
	uint32_t region_memory;   /* NPF_REGION_MEMORY_*; 0 = AUTO */
	size_t :0;                /* end of the second version (see "Versioned structs") */
	/* Bytes of pages allocated when the engine starts and kept for the
	 * region, as the kernel's huge page pool is kept for hugetlbfs: a cold
	 * region's first installs take them instead of fresh pages from the
	 * kernel (on a VM with free page reporting, 10 us or more each). With
	 * NPF_REGION_MEMORY_POOL they fill the pool; with _ANON a run of them is
	 * freed just before each install copies as many in, so that the copy
	 * takes recycled pages. Refused (-EINVAL) with _MEMFD, unused where AUTO
	 * takes a memfd. At most the region's size counts; 0 = none
	 * (npf::EngineConfig::reserve). A caller built against an earlier
	 * version passes a smaller sz and gets 0. */
	uint64_t reserve;
	size_t :0;                /* end of the third version: new fields go after it */
};

/* Opens an engine on opts->ifname in the caller's network namespace: attaches
 * npf_xdp unless it is attached already, binds the AF_XDP sockets, maps the
 * region and starts the worker and pager threads. *out is set on success. */
int npf_engine_open(const struct npf_engine_opts *opts, npf_ctx **out);

/* Who runs the data path of an npfd client (npf::ClientMode): delegated
 * where npfd's config delegates the interface, else brokered (AUTO); this
 * process, on the sockets npfd hands it, or refused (DELEGATED); npfd
 * (BROKERED). npf_ctx_mode says which a context got (and IN_PROCESS for
 * npf_engine_open's). */
#define NPF_CLIENT_MODE_AUTO       0
#define NPF_CLIENT_MODE_DELEGATED  1
#define NPF_CLIENT_MODE_BROKERED   2
#define NPF_CTX_MODE_IN_PROCESS    3

/* A connection to npfd (npf::ClientConfig). */
struct npf_client_opts {
	size_t sz;                /* sizeof(struct npf_client_opts) */
	const char *socket;       /* npfd's socket; NULL = /run/npf/npfd.sock */
	const char *name;         /* shown in npfd's log; NULL = none */
	uint64_t region_size;     /* bytes of receive memory, a multiple of page_size; 0 = 1 GiB */
	uint64_t resident_budget; /* 0 = npfd's default: the rule's fair share (resident_bytes / connections), up to region_size */
	uint64_t page_size;       /* 4096 or 2 MiB; 0 = 4096 */
	uint32_t timeout_ms;      /* for each request to npfd; 0 = 10000 */
	size_t :0;                /* end of the first version (see "Versioned structs") */
	/* NPF_CLIENT_MODE_*; 0 = AUTO. A caller built against the first
	 * version passes the smaller sz and gets AUTO. */
	uint32_t mode;
	size_t :0;                /* end of the second version: new fields go after it */
};

/* Connects to npfd, says hello and registers a region of this process with
 * it. A refusal's reason is npfd's, in npf_strerror_last(). */
int npf_client_open(const struct npf_client_opts *opts, npf_ctx **out);

/* NPF_CLIENT_MODE_DELEGATED or _BROKERED for npf_client_open's context,
 * NPF_CTX_MODE_IN_PROCESS for npf_engine_open's; -EINVAL for NULL. */
int npf_ctx_mode(const npf_ctx *ctx);

/* Closes every flow of ctx still open, then the engine (detaching npf_xdp if
 * it attached it) or the connection, and unmaps the region. NULL is a no-op. */
void npf_ctx_close(npf_ctx *ctx);

/* The region: receive buffers are [offset, offset + len) of it. *size (if
 * size is not NULL) is set to its bytes. NULL (and *size 0, errno EINVAL)
 * only for a NULL ctx. */
void *npf_region(const npf_ctx *ctx, uint64_t *size);
/* The content of [offset, offset + len) is no longer needed: evicted pages
 * are not saved and come back zeroed. Call it once the application is done
 * with received bytes, before posting the buffer again. */
int npf_release(npf_ctx *ctx, uint64_t offset, uint64_t len);
/* Makes [offset, offset + len) resident now, within the budget: pages
 * installed, or a negative errno. */
int64_t npf_populate(npf_ctx *ctx, uint64_t offset, uint64_t len);
/* Why the context is no longer served ("" while it is), copied like
 * snprintf: returns the message's length (0 while served) or -EINVAL. */
int npf_ctx_failure(const npf_ctx *ctx, char *buf, size_t len);

/* A few totals of the engine (npf::EngineStats); through npfd, this client's
 * own (its flows' completions, its region's faults). A field added later goes
 * at the end; should it leave tail padding, it ends with `size_t :0;` as the
 * options structs do. */
struct npf_ctx_counters {
	size_t sz;                   /* sizeof(struct npf_ctx_counters) */
	uint64_t completed_ok, completed_truncated, completed_lost, completed_bad_csum;
	uint64_t fast_path;          /* datagrams copied into resident pages */
	uint64_t fault_path;         /* datagrams placed by the pager (backup ring) */
	uint64_t cpu_faults;         /* the application touched a non-resident page */
	uint64_t packet_faults;      /* a datagram's page was not resident */
	uint64_t evicted, restored;  /* pages */
	uint64_t resident_pages;     /* now */
	uint64_t pinned_bytes;       /* now: the UMEM (0 through npfd) */
	uint64_t kernel_rx_dropped;  /* dropped by the kernel at the AF_XDP sockets */
};
int npf_ctx_read_counters(npf_ctx *ctx, struct npf_ctx_counters *out);

/* ---- flows ------------------------------------------------------------ */

/* Opens (or takes over, after a restart) the flow of UDP destination port
 * `port`, only for destination address `addr` (IPv4 or IPv6 text) unless it
 * is NULL. `iface`: NULL for the engine's interface, or npfd's only one;
 * through npfd, the interface to receive on when it serves several. */
int npf_flow_open(npf_ctx *ctx, uint16_t port, const char *addr, const char *iface, npf_flow_handle **out);

/* npf_flow_open with more to say: credits (npf::CreditConfig, npf/engine.h). */
struct npf_flow_opts {
	size_t sz;                   /* sizeof(struct npf_flow_opts) */
	uint16_t port;               /* the UDP destination port, 1-65535 */
	const char *addr;            /* NULL = any destination address */
	const char *iface;           /* as npf_flow_open's */
	uint32_t credits;            /* 1: grant credits to the flow's sender (npf_credit, npf/abi.h) */
	uint32_t credit_step;        /* datagrams of new grant worth a message; 0 = 64 */
	uint32_t credit_interval_us; /* at least this between two messages; 0 = 100 */
	size_t :0;                   /* end of the first version: new fields go after it */
};
int npf_flow_open_opts(npf_ctx *ctx, const struct npf_flow_opts *opts, npf_flow_handle **out);
/* Stops serving the flow (its datagrams pass to the kernel again) and frees
 * it, whatever it returns (a negative errno: npfd refused the close). Its
 * outstanding buffers complete no more. NULL is a no-op. */
int npf_flow_close(npf_flow_handle *f);

/* Posts a receive buffer [offset, offset + len) of the region; `cookie`
 * comes back in its completion. 0, -EAGAIN when NPF_POST_RING_SIZE buffers
 * are outstanding (posted, not yet polled), -EINVAL outside the region. Posts
 * reach XDP in groups of 16 and at the latest on the next poll, wait, arm
 * or flush: flush after posting fewer if you will not poll soon. */
int npf_flow_post(npf_flow_handle *f, uint64_t offset, uint32_t len, uint64_t cookie);
/* Makes every post so far visible to XDP now. */
void npf_flow_flush(npf_flow_handle *f);
/* Copies up to `max` ready completions to `out` in seq order; never blocks,
 * never makes a system call. How many, or a negative errno. */
int npf_flow_poll(npf_flow_handle *f, struct npf_completion *out, unsigned max);
/* Blocks up to timeout_ms (< 0: no limit) for at least one completion: how
 * many (> 0), 0 when the timeout passed, or a negative errno. */
int npf_flow_wait(npf_flow_handle *f, struct npf_completion *out, unsigned max, int timeout_ms);
/* Event loops (top of this file): 0 armed, > 0 completions ready, < 0 failed. */
int npf_flow_arm(npf_flow_handle *f);
/* The fd to sleep on after npf_flow_arm; owned by the flow. -EINVAL for NULL. */
int npf_flow_event_fd(const npf_flow_handle *f);
/* Buffers posted and not yet polled (at most NPF_POST_RING_SIZE); UINT64_MAX
 * for a NULL flow (errno EINVAL). */
uint64_t npf_flow_outstanding(const npf_flow_handle *f);
/* The flow's UDP port (1..65535); 0 for a NULL flow (errno EINVAL). */
uint16_t npf_flow_port(const npf_flow_handle *f);
/* npf_flow_id's result for a NULL flow: no flow's id (they are < NPF_MAX_FLOWS). */
#define NPF_FLOW_ID_NONE UINT32_MAX
/* The flow's id in npf_xdp's maps (what `npfctl flow list` shows);
 * NPF_FLOW_ID_NONE for a NULL flow (errno EINVAL). */
uint32_t npf_flow_id(const npf_flow_handle *f);
/* Why the flow is no longer served ("" while it is), copied like snprintf:
 * returns the message's length (0 while served) or -EINVAL. */
int npf_flow_failure(const npf_flow_handle *f, char *buf, size_t len);

/* Room in npf_flow_counters.xdp: outcomes appended to NPF_STATS later fit
 * without moving the fields after it. */
#define NPF_FLOW_COUNTERS_XDP 32

/* Every datagram of a flow since it was opened, accounted once (npf::FlowStats,
 * npf/stats.h; docs/cli.md "Accounting"):
 *   reached = passed + dropped_in_xdp + claimed
 *   claimed = completed_ok + completed_truncated + completed_bad_csum + completed_lost + in_flight */
struct npf_flow_counters {
	size_t sz; /* sizeof(struct npf_flow_counters) */
	/* XDP's outcomes for the flow: xdp[s - NPF_STAT_FLOW_FIRST] for enum
	 * npf_stat s >= NPF_STAT_FLOW_FIRST; entries from NPF_FLOW_STAT_MAX on are 0. */
	uint64_t xdp[NPF_FLOW_COUNTERS_XDP];
	/* Completions published to the flow, by status. */
	uint64_t completed_ok, completed_truncated, completed_bad_csum, completed_lost;
	uint64_t lost_unarrived; /* of completed_lost: the datagram never reached the service */
	uint64_t in_flight;      /* claimed, not completed yet */
	uint64_t late;           /* arrived after its seq completed LOST */
	uint64_t rejected;       /* frames refused as no seq of the flow's window */
	/* Sums of xdp[] by class (kFlowPassed, ... in npf/stats.h). */
	uint64_t reached, passed, dropped_in_xdp, claimed, lost_in_xdp;
	uint64_t socket_dropped; /* of lost_unarrived: dropped by the kernel at the AF_XDP socket */
	/* Credits (a flow opened with them; a caller built before passes the
	 * smaller sz and gets none of these): messages sent, withheld by the
	 * bound, sent after the sender had used up its grant, the last grant. */
	uint64_t credits_sent, credits_withheld, credit_waits, credit_limit;
};
/* In process from the engine and XDP's counters; through npfd, one request. */
int npf_flow_read_counters(const npf_flow_handle *f, struct npf_flow_counters *out);

/* ---- logging ---------------------------------------------------------- */

/* libnpf's log levels (npf::log::Level in npf/log.h): a line is logged when
 * its level is at most the level set. */
#define NPF_LOG_ERROR 0
#define NPF_LOG_WARN  1
#define NPF_LOG_INFO  2
#define NPF_LOG_DEBUG 3
#define NPF_LOG_TRACE 4

/* Lines above `level` are dropped from now on (the default is NPF_LOG_INFO).
 * Process-wide: every context, and libnpf's C++ API (npf::log::setLevel).
 * 0, or -EINVAL for a level outside NPF_LOG_ERROR..NPF_LOG_TRACE. */
int npf_log_set_level(int level);

/* Where libnpf's lines go instead of stderr (where each is "npf: <level>:
 * <text>"). The sink gets each line that passes the level: `line` is one
 * line, NUL-terminated, without a newline or that prefix, valid during the
 * call only; `user` is the pointer given here. It is called with a lock held
 * (one line at a time), from any thread, libnpf's own included: keep it
 * short and do not call libnpf from it (a call that logs would deadlock).
 * Process-wide, like the level (npf::log::setSink). NULL restores stderr.
 * Once this returns, the previous sink is neither running nor called again.
 * 0, or -ENOMEM. */
typedef void (*npf_log_sink_fn)(int level, const char *line, void *user);
int npf_log_set_sink(npf_log_sink_fn sink, void *user);

/* ---- sending: npf::Sender (npf/sender.h) ----------------------------- */

/* A flow's datagrams by sendmmsg, paced by the receiver's credits; see
 * npf/sender.h for what it does. */
typedef struct npf_sender npf_sender;

struct npf_sender_opts {
	size_t sz;               /* sizeof(struct npf_sender_opts) */
	const char *to;          /* the receiver's IPv4 or IPv6 address */
	uint16_t port;           /* the flow's UDP port */
	const char *from;        /* local address; NULL = the kernel's choice */
	uint16_t from_port;      /* 0 = ephemeral */
	uint32_t plain;          /* 1: honour no credits (receivers without them) */
	uint32_t initial_window; /* datagrams before the first credit; 0 = 64 */
	uint32_t timeout_ms;     /* npf_sender_send waits at most this for credit; 0 = 2000 */
	double rate;             /* datagrams per second at most; 0 = no limit */
	size_t :0;               /* end of the first version: new fields go after it */
};

struct npf_sender_counters {
	size_t sz; /* sizeof(struct npf_sender_counters) */
	uint64_t sent, credits, ignored, throttled, waited_ns, rebased, resynced, limit, received, last_hint_us;
};

int npf_sender_open(const struct npf_sender_opts *opts, npf_sender **out);
/* Sends the n datagrams of `dgrams` in order as credit allows: how many were
 * sent (all, or fewer when the timeout passed first), -ETIMEDOUT when none
 * could be, another negative errno when sending failed. */
int64_t npf_sender_send(npf_sender *s, const struct iovec *dgrams, size_t n);
int npf_sender_read_counters(const npf_sender *s, struct npf_sender_counters *out);
/* Its socket, readable when a credit waits; -EINVAL for NULL. */
int npf_sender_fd(const npf_sender *s);
void npf_sender_close(npf_sender *s);

#ifdef __cplusplus
}
#endif

#endif /* NPF_NPF_H */
