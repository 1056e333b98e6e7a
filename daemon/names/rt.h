/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtimes' readers of daemon/names (rtapi.c, rtlxc.c, rtstate.c): what one
 * runtime's state says of a name. Private to this folder.
 */
#ifndef DEVGATE_NAMES_RT_H
#define DEVGATE_NAMES_RT_H

#include <json-c/json.h>
#include <stddef.h>

/*
 * One runtime's answer for a name: 1 and *ret (pid, id, name, and what
 * its cgroup must be) when it knows the name, 0 when it does not, negative
 * errno when its state cannot be read (why says how).
 */
/* How a process's v2 cgroup must match what a runtime's state names. */
enum rt_cg {
	RT_CG_TAIL,    /* its last component (an API that names no path: Docker, LXD) */
	RT_CG_PATH,    /* the whole path, cgroup_want or cgroup_alt (runc's state) */
	RT_CG_SUBTREE, /* the whole path or one below it (LXC's init in init.scope) */
};

struct rt_found {
	char id[128];
	char name[256];
	long long pid;		  /* 0: known but not running */
	unsigned long long start; /* its start time in ticks; 0: not known */
	enum rt_cg cg_match;
	char cgroup_want[512]; /* RT_CG_TAIL: the last component; else a whole path */
	char cgroup_alt[512];  /* RT_CG_PATH: the same state read another way, or "" */
	char stopped[256];     /* pid 0: why the runtime says it is not running, or "" */
};

int rt_docker(const char *sock, const char *name, struct rt_found *ret, char *why, size_t n);
int rt_lxd(const char *sock, const char *name, struct rt_found *ret, char *why, size_t n);
int rt_runc(const char *root, const char *name, struct rt_found *ret, char *why, size_t n);
int rt_lxc(const char *lxcpath, const char *name, struct rt_found *ret, char *why, size_t n);
int rt_cri(const char *root, const char *name, struct rt_found *ret, char *why, size_t n);
int rt_podman(const char *storage, const char *runc_root, const char *name, struct rt_found *ret,
	      char *why, size_t n);

/* Called with each name a runtime's list gives (names_list). */
typedef void (*rt_each_fn)(void *ctx, const char *name);

/*
 * The names each runtime lists, running or not: 0, or negative errno and
 * why when its state cannot be read (a runtime that is not there: -ENOENT
 * or -ECONNREFUSED).
 */
int rt_docker_list(const char *sock, rt_each_fn each, void *ctx, char *why, size_t n);
int rt_lxd_list(const char *sock, rt_each_fn each, void *ctx, char *why, size_t n);
int rt_podman_list(const char *storage, rt_each_fn each, void *ctx);
int rt_dir_list(const char *dir, const char *file, rt_each_fn each, void *ctx);

/*
 * GET path from an HTTP API on a unix socket (HTTP/1.0, the server closes):
 * the status code and the body parsed as a JSON object or array (*ret, NULL
 * when the body is neither). Negative errno when the socket does not answer.
 */
int rt_http_get(const char *sock, const char *path, int *status, json_object **ret);

/* A file read whole (at most 4 MiB) as JSON of any type; NULL on failure. */
json_object *rt_json_file(const char *path);

/* Copies s (NULL reads as "") into a buffer of n bytes; -ENAMETOOLONG if longer. */
int rt_copy(char *buf, size_t n, const char *s);

#endif
