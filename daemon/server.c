// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "metrics.h"
#include "ops.h"
#include "wire.h"
#include "server.h"
#include "util.h"

struct client {
	int fd;
	uid_t uid;
	pid_t pid;
	struct dg_linebuf in;
	enum dg_op stream; /* DG_OP_WATCH or DG_OP_EVENTS once streaming, else DG_OP_MAX */
	struct client *next;
};

static int fill_addr(const char *path, struct sockaddr_un *sa, struct dg_error *err)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG, "socket path '%s' is too long",
				    path);
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

/* A socket file nobody answers on is left over from a crash. */
static int remove_stale(const struct sockaddr_un *sa, struct dg_error *err)
{
	auto_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0) {
		dg_error_set(err, DG_E_INVALID, EADDRINUSE, "another devgated answers on %s",
			     sa->sun_path);
		dg_error_hint(err, "stop it first, or give this one its own --socket");
		return -EADDRINUSE;
	}
	if (errno == ECONNREFUSED && unlink(sa->sun_path) == 0)
		log_info("removed stale socket %s", sa->sun_path);
	return 0;
}

int server_listen(struct daemon *d, struct dg_error *err)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)];
	mode_t old_umask;
	int fd, r;

	r = fill_addr(d->cfg.socket_path, &sa, err);
	if (r < 0)
		return r;
	r = path_parent(d->cfg.socket_path, dir, sizeof(dir), NULL);
	if (r == 0)
		r = mkdir_p(dir, 0755);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot create the socket directory of %s: %s",
				    d->cfg.socket_path, strerror(-r));
	r = remove_stale(&sa, err);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "socket: %m");
	old_umask = umask(0177); /* the socket is born 0600: root only */
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_umask);
	if (r < 0 || listen(fd, 64) < 0) {
		r = dg_error_set(err, DG_E_INTERNAL, errno, "cannot listen on %s: %m",
				 d->cfg.socket_path);
		close(fd);
		return r;
	}
	d->listen_fd = fd;
	return 0;
}

static void client_free(struct daemon *d, struct client *c)
{
	struct client **pp;

	for (pp = &d->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	dg_linebuf_free(&c->in);
	free(c);
}

void server_close(struct daemon *d)
{
	while (d->clients)
		client_free(d, d->clients);
	if (d->listen_fd >= 0) {
		d->listen_fd = safe_close(d->listen_fd);
		(void)unlink(d->cfg.socket_path);
	}
}

static void reply_error(int fd, const struct dg_error *err)
{
	auto_json json_object *msg = dg_reply_error(err);

	(void)dg_send(fd, msg);
}

void server_accept(struct daemon *d)
{
	for (;;) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		struct timeval tv = { .tv_sec = 2 };
		struct epoll_event ev = { .events = EPOLLIN };
		struct client *c;
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
			struct dg_error err = { 0 };

			dg_error_set(&err, DG_E_PERM, EACCES, "devgated serves root only");
			dg_error_hint(&err, "run devgatectl as root");
			reply_error(fd, &err);
			close(fd);
			continue;
		}
		/* Replies are written whole; a client that stops reading is dropped. */
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->stream = DG_OP_MAX;
		c->uid = cred.uid;
		c->pid = cred.pid;
		ev.data.ptr = c;
		if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = d->clients;
		d->clients = c;
	}
}

/* Handles one request line; returns < 0 to drop the client. */
static int handle_line(struct daemon *d, struct client *c, const char *line)
{
	struct ops_peer peer = { .uid = c->uid, .pid = c->pid };
	struct dg_request req;
	struct dg_error err = { 0 };
	struct dg_arena arena = { 0 };
	auto_json json_object *msg = NULL;
	union dg_reply reply;
	int r;

	if (c->stream != DG_OP_MAX)
		return 0; /* streaming clients only listen */
	r = dg_request_decode(line, &req, &err);
	if (r < 0) {
		metrics_request_failed(d->metrics, DG_OP_MAX, err.code);
		log_info("refused a malformed request from uid %u pid %d: %s",
			 (unsigned int)c->uid, (int)c->pid, err.message);
		msg = dg_reply_error(&err);
		return dg_send(c->fd, msg);
	}
	r = ops_dispatch(d, &peer, &req, &reply, &arena, &err);
	msg = r < 0 ? dg_reply_error(&err) : dg_reply_encode(req.op, &reply);
	if (r == 0 && ops_streams(&req))
		c->stream = req.op;
	dg_request_done(&req);
	dg_arena_free(&arena);
	return dg_send(c->fd, msg);
}

void server_client_event(struct daemon *d, struct client *c, uint32_t events)
{
	char buf[16384];
	ssize_t n;

	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		client_free(d, c);
		return;
	}
	n = read(c->fd, buf, sizeof(buf));
	if (n > 0 && dg_linebuf_append(&c->in, buf, (size_t)n) == -EMSGSIZE) {
		struct dg_error err = { 0 };

		dg_error_set(&err, DG_E_PROTOCOL, EMSGSIZE, "request larger than %zu bytes",
			     DG_MSG_MAX);
		reply_error(c->fd, &err);
		n = 0;
	}
	if (n <= 0) {
		client_free(d, c);
		return;
	}
	for (;;) {
		auto_free char *line = NULL;
		int r = dg_linebuf_pop(&c->in, &line);

		if (r == 0)
			return;
		if (r < 0 || handle_line(d, c, line) < 0) {
			client_free(d, c);
			return;
		}
	}
}

void server_broadcast(struct daemon *d, enum dg_op stream, const union dg_stream_event *ev)
{
	auto_json json_object *msg = NULL;
	struct client *c = d->clients, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->stream != stream)
			continue;
		if (!msg)
			msg = dg_event_encode(stream, ev);
		if (dg_send(c->fd, msg) < 0)
			client_free(d, c);
	}
}
