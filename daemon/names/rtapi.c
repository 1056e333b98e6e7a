// SPDX-License-Identifier: Apache-2.0
/*
 * The runtimes devgated asks over their own HTTP API on a unix socket:
 * dockerd (GET /containers/NAME/json: names, full and short IDs, as the
 * docker CLI resolves them) and LXD (GET /1.0/instances/NAME/state). It
 * only reads: one GET, a short timeout, a bounded reply; it never sends a
 * request that changes a container, and never follows a redirect.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "rt.h"
#include "util.h"

#define HTTP_MAX ((size_t)1 << 20)
#define HTTP_TIMEOUT_S 3

static int connect_unix(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = HTTP_TIMEOUT_S };
	int fd;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* A full backlog (a server that stopped accepting) waits out SO_SNDTIMEO. */
		int e = errno == EAGAIN ? -ETIMEDOUT : -errno;

		close(fd);
		return e;
	}
	return fd;
}

/*
 * Reads until the server closes; -EMSGSIZE past HTTP_MAX, -ETIMEDOUT past
 * HTTP_TIMEOUT_S in all (a server that trickles a byte at a time gets no
 * more time than one that says nothing).
 */
static int read_all(int fd, char **ret)
{
	uint64_t end = now_mono_ns() + (uint64_t)HTTP_TIMEOUT_S * 1000000000ull;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);

	while (buf) {
		uint64_t now = now_mono_ns();
		struct timeval tv;
		ssize_t n;

		if (now >= end) {
			free(buf);
			return -ETIMEDOUT;
		}
		tv = (struct timeval){ .tv_sec = (time_t)((end - now) / 1000000000ull),
				       .tv_usec =
					       (suseconds_t)((end - now) % 1000000000ull / 1000) };
		if (tv.tv_sec == 0 && tv.tv_usec == 0)
			tv.tv_usec = 1;
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

		if (len == cap) {
			char *nb = cap >= HTTP_MAX ? NULL : realloc(buf, cap * 2 + 1);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;

			free(buf);
			return e == -EAGAIN ? -ETIMEDOUT : e;
		}
		if (n == 0) {
			buf[len] = '\0';
			*ret = buf;
			return (int)len;
		}
		len += (size_t)n;
	}
	free(buf);
	return len == cap ? -EMSGSIZE : -ENOMEM;
}

int rt_http_get(const char *sock, const char *path, int *status, json_object **ret)
{
	auto_close int fd = connect_unix(sock);
	auto_free char *req = NULL;
	auto_free char *resp = NULL;
	const char *body;
	int n, r;

	*ret = NULL;
	if (fd < 0)
		return fd;
	n = asprintf(&req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
	if (n < 0)
		return -ENOMEM;
	if (write(fd, req, (size_t)n) != n)
		return -EIO;
	r = read_all(fd, &resp);
	if (r < 0 || !resp)
		return r < 0 ? r : -EPROTO;
	if (sscanf(resp, "HTTP/1.%*d %d", status) != 1)
		return -EPROTO;
	body = strstr(resp, "\r\n\r\n");
	if (body)
		*ret = json_parse_object(body + 4);
	/* A list: objects get json_parse_object's stricter checks above. */
	if (body && !*ret) {
		json_object *a = json_tokener_parse(body + 4);

		if (a && json_object_is_type(a, json_type_array))
			*ret = a;
		else
			json_object_put(a);
	}
	return 0;
}

int rt_copy(char *buf, size_t n, const char *s)
{
	if (!s)
		s = "";
	if (strlen(s) >= n)
		return -ENAMETOOLONG;
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

static int get_api(const char *what, const char *sock, const char *path, json_object **ret,
		   char *why, size_t n)
{
	int status = 0, r = rt_http_get(sock, path, &status, ret);

	if (r == -ETIMEDOUT)
		snprintf(why, n, "%s at %s did not answer within %d s", what, sock, HTTP_TIMEOUT_S);
	else if (r < 0)
		snprintf(why, n, "%s at %s: %s", what, sock, strerror(-r));
	if (r < 0)
		return r;
	if (status == 404) {
		json_object_put(*ret);
		*ret = NULL;
		return 0;
	}
	if (status != 200 || !*ret) {
		const char *msg = *ret ? json_get_str(*ret, "message") : NULL;

		if (!msg && *ret)
			msg = json_get_str(*ret, "error");
		snprintf(why, n, "%s at %s answered %d: %s", what, sock, status,
			 msg ? msg : "(no message)");
		json_object_put(*ret);
		*ret = NULL;
		return -EPROTO;
	}
	return 1;
}

int rt_docker(const char *sock, const char *name, struct rt_found *ret, char *why, size_t n)
{
	auto_json json_object *o = NULL;
	auto_free char *path = NULL;
	json_object *state;
	const char *id, *nm;
	int64_t pid = 0;
	int r;

	if (asprintf(&path, "/containers/%s/json", name) < 0)
		return -ENOMEM;
	r = get_api("dockerd", sock, path, &o, why, n);
	if (r <= 0)
		return r;
	id = json_get_str(o, "Id");
	nm = json_get_str(o, "Name");
	if (!id || !nm || !json_object_object_get_ex(o, "State", &state)) {
		snprintf(why, n, "dockerd at %s: no Id, Name or State for '%s'", sock, name);
		return -EPROTO;
	}
	if (json_get_bool(state, "Running"))
		json_get_int(state, "Pid", &pid);
	ret->pid = pid;
	ret->start = 0;
	/* cgroupfs driver: PARENT/ID; systemd driver: docker-ID.scope. */
	if (rt_copy(ret->id, sizeof(ret->id), id) < 0 ||
	    rt_copy(ret->name, sizeof(ret->name), nm[0] == '/' ? nm + 1 : nm) < 0 ||
	    rt_copy(ret->cgroup_want, sizeof(ret->cgroup_want), id) < 0)
		return -ENAMETOOLONG;
	return 1;
}

int rt_lxd(const char *sock, const char *name, struct rt_found *ret, char *why, size_t n)
{
	auto_json json_object *o = NULL;
	auto_free char *path = NULL;
	json_object *meta;
	int64_t pid = 0;
	int r;

	if (asprintf(&path, "/1.0/instances/%s/state", name) < 0)
		return -ENOMEM;
	r = get_api("LXD", sock, path, &o, why, n);
	if (r <= 0)
		return r;
	if (!json_object_object_get_ex(o, "metadata", &meta)) {
		snprintf(why, n, "LXD at %s: no metadata for '%s'", sock, name);
		return -EPROTO;
	}
	if (strcmp(json_get_str(meta, "status") ? json_get_str(meta, "status") : "", "Running") ==
	    0)
		json_get_int(meta, "pid", &pid);
	ret->pid = pid;
	ret->start = 0;
	/* LXD names an instance's cgroup lxc.payload.NAME (LXD_DIR does not enter it). */
	if (rt_copy(ret->id, sizeof(ret->id), name) < 0 ||
	    rt_copy(ret->name, sizeof(ret->name), name) < 0 ||
	    snprintf(ret->cgroup_want, sizeof(ret->cgroup_want), "lxc.payload.%s", name) >=
		    (int)sizeof(ret->cgroup_want))
		return -ENAMETOOLONG;
	return 1;
}

/* The last component of an API path ("/1.0/instances/NAME"). */
static const char *last_of(const char *s)
{
	const char *slash = s ? strrchr(s, '/') : NULL;

	return slash ? slash + 1 : s;
}

int rt_docker_list(const char *sock, rt_each_fn each, void *ctx, char *why, size_t n)
{
	auto_json json_object *o = NULL;
	int r = get_api("dockerd", sock, "/containers/json", &o, why, n);

	if (r <= 0)
		return r < 0 ? r : -EPROTO;
	if (!json_object_is_type(o, json_type_array)) {
		snprintf(why, n, "dockerd at %s: /containers/json is no list", sock);
		return -EPROTO;
	}
	for (size_t i = 0; i < json_object_array_length(o); i++) {
		const char *id = json_get_str(json_object_array_get_idx(o, i), "Id");

		if (id)
			each(ctx, id);
	}
	return 0;
}

int rt_lxd_list(const char *sock, rt_each_fn each, void *ctx, char *why, size_t n)
{
	auto_json json_object *o = NULL;
	json_object *meta;
	int r = get_api("LXD", sock, "/1.0/instances", &o, why, n);

	if (r <= 0)
		return r < 0 ? r : -EPROTO;
	if (!json_object_object_get_ex(o, "metadata", &meta) ||
	    !json_object_is_type(meta, json_type_array)) {
		snprintf(why, n, "LXD at %s: /1.0/instances is no list", sock);
		return -EPROTO;
	}
	for (size_t i = 0; i < json_object_array_length(meta); i++) {
		const char *name =
			last_of(json_object_get_string(json_object_array_get_idx(meta, i)));

		if (name && *name)
			each(ctx, name);
	}
	return 0;
}
