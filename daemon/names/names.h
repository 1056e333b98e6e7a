/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container name users know (a Docker name or ID, a podman name or ID, an
 * LXD or LXC name, a runc id, a CRI container's NAMESPACE/POD/CONTAINER or
 * ID) resolved from each runtime's own state into the
 * process and cgroup the runtime names for it.
 */
#ifndef DEVGATE_NAMES_H
#define DEVGATE_NAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "errors.h"

/* Where each runtime keeps its state; NULL or "" leaves that runtime out. */
struct names_conf {
	const char *docker_socket;  /* dockerd's API */
	const char *lxd_socket;	    /* LXD's REST API */
	const char *podman_storage; /* containers-storage's root */
	const char *runc_root;	    /* runc's --root (podman's containers too) */
	const char *lxc_path;	    /* classic LXC's lxcpath */
	const char *cri_root;	    /* the CRI runtime's runc root (its pods' containers) */
	bool cgroup_v1;		    /* a host with cgroup v1 alone: cgroups are v1 devices paths */
};

#define NAMES_ID_MAX 128
#define NAMES_NAME_MAX 256

struct name_match {
	const char *runtime; /* "docker", "podman", "lxd", "lxc", "cri", "runc" */
	char id[NAMES_ID_MAX];
	char name[NAMES_NAME_MAX]; /* the runtime's name for it, for labels */
	pid_t pid;		   /* its init, as the runtime's state says */
	char *cgroup;		   /* the init's v2 cgroup, checked against the state */
};

void name_match_done(struct name_match *m);

/*
 * True when names_resolve for runtime (NULL: every one) asks a runtime over
 * a socket (dockerd, LXD, an LXC monitor), which may keep it waiting for
 * its timeouts; runc's, podman's and CRI's state files do not.
 */
bool names_may_wait(const struct names_conf *c, const char *runtime);

/* True when runtime is one names_resolve knows. */
int names_runtime_known(const char *runtime);

/*
 * Finds name in every runtime (or in runtime alone when not NULL). Exactly
 * one running match: 0 and *ret. None: -ENOENT (DG_E_NO_TARGET, naming what
 * was searched); several: -EEXIST (DG_E_INVALID, naming them, with a hint);
 * a match that is not running: -ESRCH (DG_E_NO_TARGET).
 */
int names_resolve(const struct names_conf *c, const char *name, const char *runtime,
		  struct name_match *ret, struct dg_error *err);

/*
 * Every running container the configured runtimes list, each proved from
 * the kernel as names_resolve proves one (at most max, in ret; each
 * name_match_done by the caller). searched says where it looked, and what
 * it could not read.
 */
int names_list(const struct names_conf *c, struct name_match *ret, size_t max, size_t *n,
	       char *searched, size_t sn);

#endif
