// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "array.h"
#include "cleanup.h"
#include "grant/grant.h"
#include "log.h"
#include "metrics/metrics.h"
#include "ops.h"
#include "peer.h"
#include "lease/queue.h"
#include "wire.h"
#include "server.h"
#include "util.h"

/*
 * A reply queue beyond this is a client that does not read: it is cut. One
 * line alone may be longer (a status of thousands of leases), up to what a
 * client reads (DG_REPLY_MAX).
 */
#define OUT_MAX ((size_t)4 * 1024 * 1024)
/*
 * Above this, a client's further requests wait until it reads its replies:
 * one client pipelining thousands of requests cannot hold the loop.
 */
#define OUT_HIGH ((size_t)256 * 1024)

struct client {
	int fd;
	struct peer peer;
	struct dg_linebuf in;
	char *out; /* queued reply and event lines, not yet written */
	size_t out_len, out_off, out_cap;
	uint64_t last_ns;    /* accept, or the last complete request */
	uint32_t armed;	     /* the epoll events asked for now */
	enum dg_op stream;   /* DG_OP_WATCH or DG_OP_EVENTS once streaming, else DG_OP_MAX */
	struct waiter *wait; /* its grant waits in d->queue; it sends nothing more till then */
	struct client *next;
};

/* A grant --wait that found its GPUs busy: kept until served, timed out or cancelled. */
struct waiter {
	struct queue_entry e;
	struct dg_request req; /* the grant; its arena is the waiter's */
	int pidfd;	       /* the target's process when it was queued */
	size_t told_pos, told_of;
	char reason[DG_ERRMSG_MAX]; /* why it cannot be served now */
};

static void waiter_cancel(struct daemon *d, struct client *c, const char *why);

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

/*
 * The group that may reach the socket: socket-group, or admin-group alone
 * when only that is set (a socket has one group; admins who should reach
 * a socket-group socket are members of both).
 */
static gid_t socket_gid(const struct daemon *d)
{
	return d->cfg.socket_gid != DG_NO_GID ? d->cfg.socket_gid : d->cfg.admin_gid;
}

/* /run/devgate: root-owned; with a socket group, 0750 root:GROUP. */
static int socket_dir(struct daemon *d, const char *dir, struct dg_error *err)
{
	struct stat st;
	bool made = stat(dir, &st) < 0;
	int r = mkdir_p(dir, 0755);

	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r,
				    "cannot create the socket directory %s: %s", dir, strerror(-r));
	/* Never loosen or re-own a directory devgate did not make (say, /run). */
	if (socket_gid(d) == DG_NO_GID || (!made && strcmp(dir, "/run/devgate") != 0))
		return 0;
	if (chown(dir, 0, socket_gid(d)) < 0 || chmod(dir, 0750) < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno,
				    "cannot give %s to the socket group: %m", dir);
	return 0;
}

static int socket_access(struct daemon *d, struct dg_error *err)
{
	if (socket_gid(d) == DG_NO_GID)
		return 0;
	if (chown(d->cfg.socket_path, 0, socket_gid(d)) < 0 || chmod(d->cfg.socket_path, 0660) < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno,
				    "cannot give %s to the socket group: %m", d->cfg.socket_path);
	return 0;
}

int server_listen(struct daemon *d, struct dg_error *err)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)];
	mode_t old_umask;
	int fd, r;

	r = fill_addr(d->cfg.socket_path, &sa, err);
	if (r == 0 && path_parent(d->cfg.socket_path, dir, sizeof(dir), NULL) < 0)
		r = dg_error_set(err, DG_E_INVALID, EINVAL, "socket path '%s' has no directory",
				 d->cfg.socket_path);
	if (r == 0)
		r = socket_dir(d, dir, err);
	if (r == 0)
		r = remove_stale(&sa, err);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "socket: %m");
	old_umask = umask(0177); /* the socket is born 0600: root only */
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_umask);
	if (r < 0 || listen(fd, 128) < 0) {
		r = dg_error_set(err, DG_E_INTERNAL, errno, "cannot listen on %s: %m",
				 d->cfg.socket_path);
		close(fd);
		return r;
	}
	d->listen_fd = fd;
	return socket_access(d, err);
}

/* Stops or resumes accepting: at max-clients, or when out of descriptors. */
static void listen_pause(struct daemon *d, bool pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.u64 = TAG_LISTEN };

	if (d->listen_paused == pause || d->listen_fd < 0 || d->epfd < 0)
		return;
	if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->listen_fd, &ev) == 0)
		d->listen_paused = pause;
}

static void client_free(struct daemon *d, struct client *c)
{
	struct client **pp;

	for (pp = &d->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			d->n_clients--;
			break;
		}
	}
	if (c->wait)
		waiter_cancel(d, c, "the client left");
	(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	peer_done(&c->peer);
	dg_linebuf_free(&c->in);
	free(c->out);
	/* A status of thousands of leases would stay in malloc's free lists. */
	if (c->out_cap > OUT_HIGH)
		(void)malloc_trim(0);
	free(c);
	if (d->n_clients < d->cfg.max_clients)
		listen_pause(d, false);
}

void server_close(struct daemon *d)
{
	while (d->clients) {
		/* Its client sees the connection close: "the request was not served". */
		if (d->clients->wait)
			waiter_cancel(d, d->clients, "devgated stops");
		client_free(d, d->clients);
	}
	if (d->listen_fd >= 0) {
		d->listen_fd = safe_close(d->listen_fd);
		(void)unlink(d->cfg.socket_path);
	}
}

static size_t pending(const struct client *c)
{
	return c->out_len - c->out_off;
}

/* Reads while its queue is short, writes while it is not empty. */
static void client_arm(struct daemon *d, struct client *c)
{
	/* A waiter sends nothing until answered: only its hangup (Ctrl-C) matters. */
	uint32_t in = c->wait ? EPOLLRDHUP : pending(c) < OUT_HIGH ? EPOLLIN : 0;
	uint32_t want = in | (pending(c) ? EPOLLOUT : 0);
	struct epoll_event ev = { .events = want, .data.ptr = c };

	if (want != c->armed && epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->armed = want;
}

/* Writes what the socket takes now; < 0 when the client is gone. */
static int client_flush(struct client *c)
{
	while (pending(c)) {
		ssize_t n =
			send(c->fd, c->out + c->out_off, pending(c), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return -errno;
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/* Queues msg as one line; never blocks. < 0: cut the client. */
static int client_send(struct client *c, json_object *msg)
{
	const char *s = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	size_t len = strlen(s);

	if (len + 1 > DG_REPLY_MAX) {
		log_warning("cut client uid %u pid %d%s: a reply of %zu bytes is more than a "
			    "client reads",
			    (unsigned int)c->peer.uid, (int)c->peer.pid,
			    peer_pid_note(c->peer.pidfd), len);
		return -EMSGSIZE;
	}
	if (pending(c) && pending(c) + len + 1 > OUT_MAX) {
		log_warning("cut client uid %u pid %d%s: it stopped reading (%zu bytes queued)",
			    (unsigned int)c->peer.uid, (int)c->peer.pid,
			    peer_pid_note(c->peer.pidfd), pending(c));
		return -ENOBUFS;
	}
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (array_reserve((void **)&c->out, &c->out_cap, c->out_len + len + 1, 1) < 0)
		return -ENOMEM;
	memcpy(c->out + c->out_len, s, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	return client_flush(c);
}

static void refuse_peer(int fd, const struct peer *p)
{
	struct dg_error err = { 0 };
	auto_json json_object *msg = NULL;

	dg_error_set(&err, DG_E_PERM, EACCES, "devgated does not serve uid %u",
		     (unsigned int)p->uid);
	dg_error_hint(&err, "run devgatectl as root, or join devgated's socket-group (read) or "
			    "admin-group (grant and revoke)");
	msg = dg_reply_error(&err);
	/* Best effort and non-blocking: this peer gets no more of our time. */
	(void)send(fd, json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN),
		   strlen(json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN)),
		   MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Takes fd and the peer's pidfd. */
static void client_add(struct daemon *d, int fd, struct peer *p)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct client *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		peer_done(p);
		return;
	}
	c->fd = fd;
	c->peer = *p;
	p->pidfd = -1;
	c->stream = DG_OP_MAX;
	c->last_ns = now_mono_ns();
	c->armed = EPOLLIN;
	ev.data.ptr = c;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		peer_done(&c->peer);
		free(c);
		return;
	}
	c->next = d->clients;
	d->clients = c;
	d->n_clients++;
}

void server_accept(struct daemon *d)
{
	while (d->n_clients < d->cfg.max_clients) {
		struct peer p;
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			/* The listener stays readable: poll it again only once fds are freed. */
			log_warning("out of file descriptors with %zu clients; pausing accept",
				    d->n_clients);
			listen_pause(d, true);
			return;
		}
		if (fd < 0)
			return;
		if (peer_identify(fd, d->cfg.socket_gid, d->cfg.admin_gid, &p) < 0 ||
		    p.authority == PEER_NONE) {
			refuse_peer(fd, &p);
			close(fd);
			peer_done(&p);
			continue;
		}
		client_add(d, fd, &p);
	}
	listen_pause(d, true);
}

static struct ops_peer ops_peer_of(const struct client *c)
{
	return (struct ops_peer){ .uid = c->peer.uid,
				  .pid = c->peer.pid,
				  .pidfd = c->peer.pidfd,
				  .admin = c->peer.authority == PEER_ADMIN };
}

static int waiter_start(struct daemon *d, struct client *c, struct dg_request *req,
			const struct dg_error *busy, struct dg_error *err);

/* Handles one request line; returns < 0 to drop the client. */
static int handle_line(struct daemon *d, struct client *c, const char *line)
{
	struct ops_peer peer = ops_peer_of(c);
	struct dg_request req;
	struct dg_error err = { 0 };
	struct dg_arena arena = { 0 };
	auto_json json_object *msg = NULL;
	union dg_reply reply;
	int r;

	if (c->stream != DG_OP_MAX)
		return 0; /* streaming clients only listen */
	c->last_ns = now_mono_ns();
	r = dg_request_decode(line, &req, &err);
	if (r < 0) {
		metrics_request_failed(d->metrics, DG_OP_MAX, err.code);
		log_info("refused a malformed request from uid %u pid %d%s: %s",
			 (unsigned int)c->peer.uid, (int)c->peer.pid, peer_pid_note(c->peer.pidfd),
			 err.message);
		msg = dg_reply_error(&err);
		return client_send(c, msg);
	}
	r = ops_dispatch(d, &peer, &req, &reply, &arena, &err);
	if (ops_may_wait(&req, r, &err)) {
		struct dg_error busy = err;

		err = (struct dg_error){ 0 };
		r = waiter_start(d, c, &req, &busy, &err);
		if (r == 0) {
			dg_arena_free(&arena);
			return 0;
		}
	}
	msg = r < 0 ? dg_reply_error(&err) : dg_reply_encode(req.op, &reply);
	if (r == 0 && ops_streams(&req))
		c->stream = req.op;
	dg_request_done(&req);
	dg_arena_free(&arena);
	return client_send(c, msg);
}

/* Serves the buffered requests while the client keeps reading its replies. */
static int client_lines(struct daemon *d, struct client *c)
{
	while (pending(c) < OUT_HIGH && !c->wait) {
		auto_free char *line = NULL;
		int r = dg_linebuf_pop(&c->in, &line);

		if (r <= 0)
			return r;
		r = handle_line(d, c, line);
		if (r < 0)
			return r;
	}
	return 0;
}

static int client_read(struct daemon *d, struct client *c)
{
	char buf[16384];
	ssize_t n = read(c->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n > 0 && dg_linebuf_append(&c->in, buf, (size_t)n) == -EMSGSIZE) {
		struct dg_error err = { 0 };
		auto_json json_object *msg = NULL;

		dg_error_set(&err, DG_E_PROTOCOL, EMSGSIZE, "request larger than %zu bytes",
			     DG_MSG_MAX);
		msg = dg_reply_error(&err);
		(void)client_send(c, msg);
		return -EMSGSIZE;
	}
	if (n <= 0)
		return -ECONNRESET;
	return client_lines(d, c);
}

void server_client_event(struct daemon *d, struct client *c, uint32_t events)
{
	int r = 0;

	if (events & EPOLLOUT)
		r = client_flush(c);
	/* Its queue drained: the requests that waited for that come next. */
	if (r == 0 && events & EPOLLOUT)
		r = client_lines(d, c);
	if (r == 0 && events & EPOLLIN)
		r = client_read(d, c);
	else if (r == 0 && events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP) && !(events & EPOLLOUT))
		r = -ECONNRESET;
	if (r < 0)
		client_free(d, c);
	else
		client_arm(d, c);
}

void server_tick(struct daemon *d)
{
	uint64_t now = now_mono_ns(), limit = (uint64_t)d->cfg.client_timeout_ms * 1000000;
	struct client *c = d->clients, *next;

	for (; c; c = next) {
		next = c->next;
		/* Streams wait for events as long as they like; requests do not. */
		if (c->stream == DG_OP_MAX && !c->wait && now - c->last_ns > limit) {
			if (pending(c))
				log_info(
					"cut client uid %u pid %d%s: it stopped reading (%zu bytes "
					"queued for %u ms)",
					(unsigned int)c->peer.uid, (int)c->peer.pid,
					peer_pid_note(c->peer.pidfd), pending(c),
					d->cfg.client_timeout_ms);
			else
				log_info(
					"cut client uid %u pid %d%s: no complete request for %u ms",
					(unsigned int)c->peer.uid, (int)c->peer.pid,
					peer_pid_note(c->peer.pidfd), d->cfg.client_timeout_ms);
			client_free(d, c);
		}
	}
	/* Descriptors may have been freed elsewhere since accept ran out. */
	if (d->n_clients < d->cfg.max_clients)
		listen_pause(d, false);
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
		if (client_send(c, msg) < 0)
			client_free(d, c);
		else
			client_arm(d, c);
	}
}

/*
 * The queue of grants that wait (grant --wait). A waiter keeps its
 * connection: it gets its place as event lines, then one reply. The
 * order is queue.c's; serving tries each waiter in that order, so a GPU
 * that frees goes to the first waiter it satisfies.
 */

static void waiter_free(struct waiter *w)
{
	safe_close(w->pidfd);
	dg_request_done(&w->req);
	free(w);
}

static void waiter_log_name(const struct waiter *w, char *buf, size_t len)
{
	const struct dg_target_args *t = &w->req.u.grant.target;

	if (t->container)
		snprintf(buf, len, "%s", t->container);
	else if (t->has_pid)
		snprintf(buf, len, "PID %lld", (long long)t->pid);
	else
		snprintf(buf, len, "cgroup %s", t->cgroup);
}

/* Takes c's waiter out of the queue; the caller replies or frees the client. */
static struct waiter *waiter_take(struct daemon *d, struct client *c)
{
	struct waiter *w = c->wait;

	c->wait = NULL;
	(void)queue_remove(&d->queue, &w->e);
	d->queue_moved = true;
	return w;
}

static void waiter_cancel(struct daemon *d, struct client *c, const char *why)
{
	struct waiter *w = waiter_take(d, c);
	char name[128];

	waiter_log_name(w, name, sizeof(name));
	log_info("the waiting grant for %s was cancelled: %s", name, why);
	metrics_inc(d->metrics, METRIC_QUEUE_CANCELLED, 1);
	waiter_free(w);
}

/* Sends the waiter's last line and lets the client send requests again. */
static void waiter_finish(struct daemon *d, struct client *c, json_object *msg)
{
	if (client_send(c, msg) < 0 || client_lines(d, c) < 0)
		client_free(d, c);
	else
		client_arm(d, c);
}

static void waiter_fail(struct daemon *d, struct client *c, const struct dg_error *err)
{
	auto_json json_object *msg = dg_reply_error(err);

	waiter_free(waiter_take(d, c));
	waiter_finish(d, c, msg);
}

static int waiter_start(struct daemon *d, struct client *c, struct dg_request *req,
			const struct dg_error *busy, struct dg_error *err)
{
	struct ops_peer peer = ops_peer_of(c);
	struct epoll_event ev;
	struct waiter *w;
	char name[128];
	int pidfd = -1;
	int r = ops_wait_check(d, &peer, req, &pidfd, err);

	if (r < 0)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w) {
		safe_close(pidfd);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	w->pidfd = pidfd;
	w->e = (struct queue_entry){
		.priority = req->u.grant.priority,
		.since_ns = now_mono_ns(),
		.uid = c->peer.uid,
		.owner = c,
	};
	if (req->u.grant.wait)
		w->e.deadline_ns = w->e.since_ns + (uint64_t)req->u.grant.wait * 1000000000ull;
	snprintf(w->reason, sizeof(w->reason), "%s", busy->message);
	if (queue_add(&d->queue, &w->e) < 0) {
		waiter_free(w);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	w->req = *req; /* the arena too: the waiter owns the request now */
	*req = (struct dg_request){ .op = DG_OP_GRANT };
	w->e.grant = &w->req.u.grant;
	c->wait = w;
	d->queue_moved = true;
	/*
	 * Its end wakes the loop. Tagged by the waiter's number, not a pointer:
	 * an event of this batch may come after the waiter is gone.
	 */
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_WAITER | w->e.seq };
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, pidfd, &ev) < 0)
		log_debug("cannot poll the target of a waiting grant: %m; the periodic check will");
	waiter_log_name(w, name, sizeof(name));
	log_info("the grant for %s waits (priority %lld, position %zu of %zu): %s", name,
		 (long long)w->e.priority, queue_position(&d->queue, &w->e), d->queue.n, w->reason);
	return 0;
}

/* Tries c's grant again; true if it left the queue (served or failed). */
static bool waiter_try(struct daemon *d, struct client *c)
{
	struct ops_peer peer = ops_peer_of(c);
	struct waiter *w = c->wait;
	struct dg_error err = { 0 };
	struct dg_arena arena = { 0 };
	auto_json json_object *msg = NULL;
	union dg_reply reply;
	uint64_t waited;
	char name[128];
	int r = ops_dispatch(d, &peer, &w->req, &reply, &arena, &err);

	if (ops_may_wait(&w->req, r, &err)) {
		snprintf(w->reason, sizeof(w->reason), "%s", err.message);
		dg_arena_free(&arena);
		return false;
	}
	waited = now_mono_ns() - w->e.since_ns;
	waiter_log_name(w, name, sizeof(name));
	if (r == 0) {
		/* The second figure: from the wake-up that found a GPU freed (a container's exit).
		 */
		log_info(
			"served the waiting grant for %s after %.1f ms in the queue, %.1f ms after "
			"the event that freed its GPUs",
			name, (double)waited / 1e6,
			d->dirty_ns ? (double)(now_mono_ns() - d->dirty_ns) / 1e6 : 0.0);
		metrics_queue_served(d->metrics, waited);
	} else {
		metrics_inc(d->metrics, METRIC_QUEUE_CANCELLED, 1);
	}
	msg = r < 0 ? dg_reply_error(&err) : dg_reply_encode(DG_OP_GRANT, &reply);
	waiter_free(waiter_take(d, c));
	dg_arena_free(&arena);
	waiter_finish(d, c, msg);
	return true;
}

static void waiters_serve(struct daemon *d)
{
	d->queue_dirty = false;
	for (size_t i = 0; i < d->queue.n;) {
		if (!waiter_try(d, d->queue.v[i]->owner))
			i++;
	}
}

static void waiter_timeout(struct daemon *d, struct client *c)
{
	struct waiter *w = c->wait;
	struct dg_error err = { 0 };

	dg_error_set(&err, DG_E_UNAVAILABLE, ETIMEDOUT,
		     "waited %llds in the queue and no GPU became free: %s",
		     (long long)w->req.u.grant.wait, w->reason);
	dg_error_hint(&err, "wait longer (--wait=TIMEOUT, or --wait alone for no limit), ask "
			    "with a higher --priority, or see who holds the GPUs with "
			    "'devgatectl list'");
	log_info("a waiting grant timed out: %s", err.message);
	metrics_inc(d->metrics, METRIC_QUEUE_TIMEOUTS, 1);
	waiter_fail(d, c, &err);
}

/* Each waiter whose place changed hears of it. */
static void waiters_tell(struct daemon *d)
{
	d->queue_moved = false;
	for (size_t i = 0; i < d->queue.n; i++) {
		struct client *c = d->queue.v[i]->owner;
		struct waiter *w = c->wait;
		auto_json json_object *msg = NULL;
		union dg_stream_event ev = {
			.wait = { .type = "waiting",
				  .position = (int64_t)i + 1,
				  .of = (int64_t)d->queue.n,
				  .reason = w->reason },
		};

		if (w->told_pos == i + 1 && w->told_of == d->queue.n)
			continue;
		w->told_pos = i + 1;
		w->told_of = d->queue.n;
		msg = dg_event_encode(DG_OP_GRANT, &ev);
		if (client_send(c, msg) < 0) {
			client_free(d, c); /* its waiter goes too: start again */
			d->queue_moved = true;
			return;
		}
		client_arm(d, c);
	}
}

void server_queue_run(struct daemon *d)
{
	uint64_t now = now_mono_ns();

	for (size_t i = 0; i < d->queue.n;) {
		const struct queue_entry *e = d->queue.v[i];

		if (e->deadline_ns && e->deadline_ns <= now)
			waiter_timeout(d, e->owner);
		else
			i++;
	}
	if (d->queue_dirty)
		waiters_serve(d);
	while (d->queue_moved)
		waiters_tell(d);
}

/* Drops c's waiter if its container ended; true if it did. */
static bool waiter_check(struct daemon *d, struct client *c)
{
	struct dg_error err = { 0 };

	if (!grant_target_gone(d, &c->wait->req.u.grant.target, c->wait->pidfd))
		return false;
	dg_error_set(&err, DG_E_NO_TARGET, ESRCH,
		     "the container ended while its grant waited in the queue");
	log_info("a waiting grant was dropped: %s", err.message);
	metrics_inc(d->metrics, METRIC_QUEUE_CANCELLED, 1);
	waiter_fail(d, c, &err);
	return true;
}

void server_waiter_event(struct daemon *d, uint64_t tag)
{
	for (size_t i = 0; i < d->queue.n; i++) {
		struct client *c = d->queue.v[i]->owner;

		if ((TAG_WAITER | d->queue.v[i]->seq) != tag)
			continue;
		/*
		 * For a cgroup target that was only its first process: the pidfd
		 * leaves the loop and the periodic check watches the cgroup.
		 */
		if (!waiter_check(d, c))
			(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->wait->pidfd, NULL);
		return;
	}
}

void server_queue_check(struct daemon *d)
{
	for (size_t i = 0; i < d->queue.n;) {
		if (!waiter_check(d, d->queue.v[i]->owner))
			i++;
	}
}

int server_queue_timeout_ms(const struct daemon *d)
{
	uint64_t next = queue_next_deadline(&d->queue), now = now_mono_ns();

	if (d->queue_dirty || d->queue_moved)
		return 0;
	if (!next)
		return -1;
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}
