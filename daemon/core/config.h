/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's settings: built-in defaults, then the configuration file, then
 * the command line. A file key is named like the long option that sets the
 * same thing ("state-dir = /var/lib/devgate" is "--state-dir /var/lib/devgate"),
 * so both go through config_set() and are checked the same way.
 *
 * File format, one setting a line:  key = value
 * Blank lines and lines starting with '#' are ignored; a '#' after white
 * space starts a comment. A key may appear only once.
 */
#ifndef DEVGATE_CONFIG_H
#define DEVGATE_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "errors.h"
#include "lease/hostdev.h"
#include "lease/policy.h"

#define DG_DEFAULT_CONFIG "/etc/devgate/devgate.conf"

struct dg_config {
	char *socket_path;
	char *state_dir;
	char *pin_root;
	char *host_root;
	char *metrics_listen; /* ADDR:PORT or NULL */
	char *cgroup_root;    /* the cgroup v2 mount; NULL: from mountinfo */
	/* Where runtimes keep the state names are resolved from; NULL: not searched. */
	char *docker_socket;
	char *podman_storage;
	char *lxd_socket;
	char *runc_root;
	char *lxc_path;
	char *cri_root;
	mode_t node_mode;
	uid_t node_uid;
	gid_t node_gid;
	bool hook_env;			/* honour NVIDIA_VISIBLE_DEVICES from images */
	bool attach_events;		/* heal on attach events, not only at re-checks */
	bool gate_beside;		/* gate-mode = beside (else replace) */
	unsigned int recheck_ms;	/* period of the guard re-check */
	unsigned int heal_ms;		/* shortest period of the displaced-gate check; 0: off */
	unsigned int max_clients;	/* connections served at once; root gets in past it */
	unsigned int clients_per_uid;	/* connections of one uid other than root */
	unsigned int streams_per_uid;	/* watch and events streams of one uid other than root */
	unsigned int reserved_clients;	/* of max_clients, kept from socket-group readers */
	unsigned int client_timeout_ms; /* an idle or half-sent request is cut after */
	gid_t socket_gid;		/* may read (list, status, ...); DG_NO_GID: none */
	gid_t admin_gid;		/* may also grant and revoke; DG_NO_GID: none */
	int log_level;
	int seccomp;			   /* enum dg_seccomp_mode (confine.h) */
	struct dg_policy policy;	   /* gpu-allow, aliases, profiles */
	struct hostdev_allow device_allow; /* host devices past a container's walls */
};

#define DG_NO_GID ((gid_t)-1)

/* Fills c with the built-in defaults; -ENOMEM. */
int config_init(struct dg_config *c);
void config_free(struct dg_config *c);

/*
 * Sets key from its text form. Unknown key or bad value: DG_E_INVALID, with
 * a message that names neither the key's origin nor the key itself, so the
 * caller can prefix "FILE:LINE: key" or "--key".
 */
int config_set(struct dg_config *c, const char *key, const char *value, struct dg_error *err);
bool config_key_known(const char *key);

/* Applies config text; errors are DG_E_CONFIG "NAME:LINE: ...". */
int config_parse(struct dg_config *c, const char *name, const char *text, struct dg_error *err);
/*
 * Reads and applies a file; a missing one is fine unless required. Only a
 * file that root alone can change is read: a regular file, owned by root
 * (or by the user running devgated) and not writable by group or others, in
 * directories likewise from / down (a sticky one, as /tmp, is fine); a
 * symlink counts as the file it leads to. A FIFO or a device is never
 * opened; the null device reads as an empty file (--config /dev/null). Any
 * other is refused with DG_E_CONFIG naming the reason.
 */
int config_load(struct dg_config *c, const char *path, bool required, struct dg_error *err);

/*
 * A reload: moves from's policy (gpu-allow, aliases, profiles,
 * device-allow) into c. The other keys stay as they are (they take effect
 * at the next start); those that differ are named in restart, ", " apart.
 */
void config_take_policy(struct dg_config *c, struct dg_config *from, char *restart, size_t len);

/* The effective settings, in the file format (every key, one a line). */
void config_print(const struct dg_config *c, FILE *f);

#endif
