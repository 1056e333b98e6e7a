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
#include <json-c/json.h>

#include "bpfgate.h"
#include "cgroup.h"
#include "gpu.h"
#include "lease.h"
#include "state.h"

struct dg_config {
	char *socket_path;
	char *state_dir;
	char *pin_root;
	char *host_root;
	char *metrics_listen; /* ADDR:PORT or NULL */
	mode_t node_mode;
	uid_t node_uid;
	gid_t node_gid;
	bool hook_env;	     /* honour NVIDIA_VISIBLE_DEVICES from images */
	unsigned int recheck_ms; /* period of the guard re-check */
	int log_level;
};

struct client;
struct events;
struct metrics;

struct daemon {
	struct dg_config cfg;
	struct dg_inventory *inv;
	struct cgroot cg;
	char *self_cgroup;
	struct bpfgate *bg;
	struct state *state;
	struct lease_table leases;
	struct metrics *metrics;
	struct events *events;
	int epfd;
	int listen_fd;
	int signal_fd;
	int inotify_fd;
	int timer_fd;
	struct client *clients;
	bool quit;
};

/* Sends an event line to every client streaming stream ("watch", "events"). */
void server_broadcast(struct daemon *d, const char *stream, json_object *event);

#endif
