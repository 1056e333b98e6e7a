/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's state, shared by its modules. One thread runs everything from
 * an epoll loop; only the node helper is forked.
 */
#ifndef DEVGATE_DAEMON_H
#define DEVGATE_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpu.h"
#include "lease/lease.h"
#include "sys/cgroup.h"
#include "sys/cgroup1.h"

/* Each module includes the header of what it uses; here they are only named. */
struct admit;
struct attach_watch;
struct bpfgate;
struct dg_config;
struct client;
struct daemon;
struct events;
struct metrics;
struct metrics_http;
struct lease;
struct dg_denied_event;
struct state;
struct waiting;

/*
 * What the modules that change state report, and who listens: main.c wires
 * these to the server (watch and events streams), metrics and the lease
 * transactions, so no module calls back into the one that called it.
 */
struct daemon_hooks {
	/*
	 * type: "granted", "revoked", "released", "expired" or "extended"; l is the
	 * lease after the change.
	 */
	void (*lease_changed)(struct daemon *d, const char *type, const struct lease *l,
			      const char *const *gpus, size_t n_gpus);
	/* GPUs may have appeared or been allowed again (rescan.c, reload.c): try the waiters. */
	void (*capacity_changed)(struct daemon *d);
	/*
	 * The inventory was re-read and swapped (rescan.c), and the old driver's
	 * majors are still guarded: leases whose numbers moved must follow now.
	 * Returns how many could not (they keep the old nodes until a later try).
	 */
	size_t (*inventory_swapped)(struct daemon *d);
	/* A leased cgroup's processes are gone (watch.c): its lease must go. */
	void (*cgroup_ended)(struct daemon *d, uint64_t cgid, const char *why);
	/* A lease's expiry passed (expiry.c): it must be revoked. */
	void (*lease_expired)(struct daemon *d, uint64_t cgid);
	/* A denied access read from the BPF ring (events.c). */
	void (*denied)(struct daemon *d, const struct dg_denied_event *ev);
	/* Defaults, devgate.conf, the command line into c, as at start (main.c); for reload.c. */
	int (*load_config)(struct dg_config *c, struct dg_error *err);
};

struct daemon {
	struct dg_config *cfg; /* the settings in force (main.c owns them) */
	struct dg_inventory *inv;
	struct cgroot cg;
	struct cg1root cg1; /* fd -1: no cgroup v1 devices hierarchy (a pure v2 host) */
	char *self_cgroup;
	struct bpfgate *bg;
	struct state *state;
	struct lease_table leases;
	struct metrics *metrics;
	struct metrics_http *http; /* NULL unless metrics-listen is set */
	struct events *events;
	struct attach_watch *attach; /* NULL: the periodic re-check alone heals */
	int epfd;
	int listen_fd;
	int signal_fd;
	int inotify_fd;
	int v1exit_fd; /* epoll set of leased containers' pidfds (cgroup v1 alone); -1: none */
	int timer_fd;
	int heal_fd;	      /* one-shot timer of the displaced-gate check */
	int uevent_fd;	      /* kernel uevents (rescan.c); -1 without */
	int expiry_fd;	      /* CLOCK_REALTIME timer at the earliest lease expiry */
	int64_t expiry_armed; /* the expiry it is armed for; 0: disarmed */
	size_t heal_next;     /* the lease the next heal tick starts at */
	bool heal_asleep;     /* the last heal tick found no lease and did not re-arm */
	size_t tick_cursor;   /* next lease the periodic end check looks at (watch.c) */
	size_t recheck_next;  /* next lease the periodic gate re-check looks at (heal.c) */
	struct client *clients;
	size_t n_clients;
	struct admit *admit;	 /* connection slots by uid and authority (server/admit.h) */
	bool listen_paused;	 /* at max-clients, or out of file descriptors */
	struct waiting *waiting; /* grants waiting for GPUs (server/waiting.c) */
	uint64_t wake_ns;	 /* when the loop woke for what it handles now */
	struct daemon_hooks hooks;
	bool quit;
};

#endif
