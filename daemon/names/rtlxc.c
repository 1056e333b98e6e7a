// SPDX-License-Identifier: Apache-2.0
/*
 * Classic LXC's names, from LXC's own command socket: the monitor of a
 * running container listens on the abstract unix socket
 * "@LXCPATH/NAME/command" (or "@lxc/HASH/command" when that is too long)
 * and answers one command per connection in liblxc's native layout
 * (struct lxc_cmd_req / lxc_cmd_rsp: two ints and a pointer-sized word).
 * devgated asks GET_INIT_PID and GET_CGROUP, nothing else: no command that
 * changes a container. A container LXC knows (LXCPATH/NAME/config) whose
 * socket does not answer is known and not running. An abstract socket has
 * no owner on disk, so anyone could bind that name first: the answer is
 * taken only from a peer whose uid owns LXCPATH/NAME/config (root's containers'
 * monitor runs as root).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "rt.h"

#define LXC_TIMEOUT_S 3

/* liblxc's command numbers (commands.h, stable since LXC 1.0). */
enum {
	LXC_GET_INIT_PID = 4,
	LXC_GET_CGROUP = 6,
};

/* liblxc's wire layout: the same struct on both ends of a local socket. */
struct lxc_req {
	int cmd;
	int datalen;
	const void *data;
};

struct lxc_rsp {
	int ret; /* 0, or negative errno */
	int datalen;
	void *data; /* the answer itself when it fits, as for the init's PID */
};

/* FNV-1a, 64 bits: how liblxc names a socket whose path does not fit. */
static uint64_t fnv64a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The socket's address; *len is what connect() takes. */
static int lxc_addr(const char *lxcpath, const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t room = sizeof(sa->sun_path) - 2; /* the leading \0 and liblxc's trailing one */
	int n;

	*sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
	n = snprintf(sa->sun_path + 1, room, "%s/%s/command", lxcpath, name);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= room) {
		char both[4096];
		int m = snprintf(both, sizeof(both), "%s/%s", lxcpath, name);

		if (m < 0 || (size_t)m >= sizeof(both))
			return -ENAMETOOLONG;
		n = snprintf(sa->sun_path + 1, room, "lxc/%016" PRIx64 "/command",
			     fnv64a(both, (size_t)m));
	}
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (r == 0)
			return -EPROTO;
		got += (size_t)r;
	}
	return 0;
}

/*
 * Sends one command with arg (a string, or NULL for none); the answer in
 * *rsp and, when it carries data, up to n bytes of it in buf
 * (NUL-terminated). -ECONNREFUSED when no monitor listens.
 */
static int lxc_ask(const char *lxcpath, const char *name, uid_t owner, int cmd, const char *arg,
		   struct lxc_rsp *rsp, char *buf, size_t n)
{
	struct ucred cred = { 0 };
	socklen_t cl = sizeof(cred);
	struct timeval tv = { .tv_sec = LXC_TIMEOUT_S };
	/* The pointer is the sender's own; the monitor reads datalen bytes after. */
	struct lxc_req req = { .cmd = cmd, .datalen = arg ? (int)strlen(arg) + 1 : 0 };
	struct sockaddr_un sa;
	auto_close int fd = -1;
	socklen_t len;
	int r = lxc_addr(lxcpath, name, &sa, &len);

	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, len) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return -errno;
	if (cred.uid != owner)
		return -EPERM;
	if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req) ||
	    (arg && send(fd, arg, (size_t)req.datalen, MSG_NOSIGNAL) != req.datalen))
		return -EIO;
	r = read_full(fd, rsp, sizeof(*rsp));
	if (r < 0)
		return r;
	if (rsp->ret < 0)
		return rsp->ret;
	if (buf && n)
		buf[0] = '\0';
	if (rsp->datalen <= 0)
		return 0;
	if (!buf || (size_t)rsp->datalen >= n)
		return -EMSGSIZE;
	r = read_full(fd, buf, (size_t)rsp->datalen);
	if (r < 0)
		return r;
	buf[rsp->datalen] = '\0';
	return 0;
}

int rt_lxc(const char *lxcpath, const char *name, struct rt_found *ret, char *why, size_t n)
{
	struct lxc_rsp rsp = { 0 };
	char path[4096], cg[512] = "";
	struct stat st;
	size_t len;
	intptr_t pid;
	int r;

	if (snprintf(path, sizeof(path), "%s/%s/config", lxcpath, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &st) < 0)
		return 0;
	if (rt_copy(ret->id, sizeof(ret->id), name) < 0 ||
	    rt_copy(ret->name, sizeof(ret->name), name) < 0)
		return -ENAMETOOLONG;
	ret->pid = 0;
	ret->start = 0;
	r = lxc_ask(lxcpath, name, st.st_uid, LXC_GET_INIT_PID, NULL, &rsp, NULL, 0);
	if (r == -ECONNREFUSED || r == -ENOENT) {
		/* Abstract sockets are per network namespace: devgated sees its own alone. */
		snprintf(ret->stopped, sizeof(ret->stopped),
			 "no LXC monitor answers on @%s/%s/command in devgated's network "
			 "namespace (it is stopped, or its monitor runs in another one)",
			 lxcpath, name);
		return 1;
	}
	if (r == -EPERM) {
		snprintf(why, n,
			 "its command socket is held by another uid than its owner's (%u): "
			 "not LXC's",
			 (unsigned int)st.st_uid);
		return r;
	}
	if (r == -ETIMEDOUT || r == -EAGAIN) {
		snprintf(why, n, "LXC's command socket @%s/%s/command did not answer within %d s",
			 lxcpath, name, LXC_TIMEOUT_S);
		return -ETIMEDOUT;
	}
	if (r < 0) {
		snprintf(why, n, "LXC's command socket @%s/%s/command: %s", lxcpath, name,
			 strerror(-r));
		return r;
	}
	pid = (intptr_t)rsp.data;
	/*
	 * No controller names the unified hierarchy only when it has none; else
	 * the devices controller's, which is the unified one where LXC gates
	 * devices by BPF (LXC uses one name in every hierarchy).
	 */
	r = lxc_ask(lxcpath, name, st.st_uid, LXC_GET_CGROUP, NULL, &rsp, cg, sizeof(cg));
	if (r < 0)
		r = lxc_ask(lxcpath, name, st.st_uid, LXC_GET_CGROUP, "devices", &rsp, cg,
			    sizeof(cg));
	if (r < 0) {
		snprintf(why, n, "LXC's command socket @%s/%s/command named no cgroup: %s", lxcpath,
			 name, strerror(-r));
		return r;
	}
	len = strlen(cg);
	while (len > 0 && cg[len - 1] == '/')
		cg[--len] = '\0';
	if (pid <= 0 || len == 0) {
		snprintf(why, n, "LXC's command socket for '%s' answered PID %lld, cgroup '%s'",
			 name, (long long)pid, cg);
		return -EPROTO;
	}
	ret->pid = pid;
	/*
	 * The container's whole cgroup, from its hierarchy's root; its init may
	 * sit below it (systemd's init.scope in a system container).
	 */
	ret->cg_match = RT_CG_SUBTREE;
	if (snprintf(ret->cgroup_want, sizeof(ret->cgroup_want), "%s%s", cg[0] == '/' ? "" : "/",
		     cg) >= (int)sizeof(ret->cgroup_want))
		return -ENAMETOOLONG;
	return 1;
}
