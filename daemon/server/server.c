// SPDX-License-Identifier: Apache-2.0
/*
 * The control socket and its clients: accepts connections, gives each a
 * slot or cuts a less valuable one to make room (admit.c counts them),
 * reads request lines, hands each decoded request to ops.c and queues the
 * encoded reply, and streams events to the clients that asked for them.
 * Every socket is non-blocking: a client that stops reading is cut, never
 * waited for.
 *
 * This file must not decide what a request does (ops.c does) nor keep
 * waiting grants (waiting.c does; a client only points at its waiter).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/config.h"
#include "admit.h"
#include "byname.h"
#include "array.h"
#include "cleanup.h"
#include "grant/grant.h"
#include "log.h"
#include "metrics/metrics.h"
#include "ops.h"
#include "peer.h"
#include "wire.h"
#include "server.h"
#include "util.h"
#include "waiting.h"

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
/*
 * The kernel's queue of connections not accepted yet. devgated accepts at
 * once and decides after, so the queue only holds what arrived since the
 * last turn of the loop; a short one keeps a flood of connections from
 * standing in front of root's. A blocking connect (devgatectl's, the
 * hook's) waits for room in it; only a non-blocking one sees EAGAIN.
 */
#define LISTEN_BACKLOG 16
/*
 * Connections accepted in one turn of the loop, so that a flood of
 * connections cannot keep the clients already in from being served.
 */
#define ACCEPT_BURST 64
/*
 * A connection with no complete request for this long may be cut to make
 * room for a newcomer; younger ones may be about to send theirs.
 */
#define IDLE_GRACE_NS (100 * 1000000ull)
/* At most one line a second about connections refused or cut for room. */
#define ADMIT_LOG_NS (1000 * 1000000ull)

struct client {
	int fd;
	struct peer peer;
	struct dg_linebuf in;
	char *out; /* queued reply and event lines, not yet written */
	size_t out_len, out_off, out_cap;
	uint64_t last_ns;	/* accept, or the last complete request */
	uint32_t armed;		/* the epoll events asked for now */
	enum dg_op stream;	/* DG_OP_WATCH or DG_OP_EVENTS once streaming, else DG_OP_MAX */
	struct waiter *wait;	/* its grant waits (waiting.c); it sends nothing more till then */
	struct byname_job *job; /* its request waits for runtimes' answers (byname.c); likewise */
	struct client *next;
};

/* Fills sa with the socket's path; fails when a unix socket address cannot hold it. */
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

/*
 * Removes the socket file if nobody answers on it (it is left over from a
 * crash). Fails when another devgated answers there.
 */
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
 * Returns the group that may reach the socket: socket-group, or admin-group
 * when only that is set. A socket file has one group, so admins who should
 * reach a socket-group socket must be members of both.
 */
static gid_t socket_gid(const struct daemon *d)
{
	return d->cfg->socket_gid != DG_NO_GID ? d->cfg->socket_gid : d->cfg->admin_gid;
}

/*
 * Makes the socket's directory (/run/devgate, root-owned) and, with a socket
 * group, gives it to that group (0750) so that its members can reach the
 * socket inside.
 */
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

/* Gives the socket file to the socket group (0660), when one is set. */
static int socket_access(struct daemon *d, struct dg_error *err)
{
	if (socket_gid(d) == DG_NO_GID)
		return 0;
	if (chown(d->cfg->socket_path, 0, socket_gid(d)) < 0 ||
	    chmod(d->cfg->socket_path, 0660) < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno,
				    "cannot give %s to the socket group: %m", d->cfg->socket_path);
	return 0;
}

int server_lock(struct daemon *d, int *ret, struct dg_error *err)
{
	char dir[sizeof(((struct sockaddr_un *)NULL)->sun_path)], lock[PATH_MAX];
	auto_close int fd = -1;
	int r = 0;

	if (path_parent(d->cfg->socket_path, dir, sizeof(dir), NULL) < 0)
		r = dg_error_set(err, DG_E_INVALID, EINVAL, "socket path '%s' has no directory",
				 d->cfg->socket_path);
	if (r == 0)
		r = socket_dir(d, dir, err);
	if (r < 0)
		return r;
	/* Beside the socket, so that any path to its directory locks the same file. */
	snprintf(lock, sizeof(lock), "%s.lock", d->cfg->socket_path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "cannot open %s: %m", lock);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = dg_error_set(err, DG_E_STATE, errno, "socket %s is in use by another devgated",
				 d->cfg->socket_path);
		dg_error_hint(err, "stop the other daemon, or give this one its own --socket");
		return r;
	}
	*ret = TAKE_FD(fd);
	return 0;
}

int server_listen(struct daemon *d, struct dg_error *err)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)];
	mode_t old_umask;
	int fd, r;

	r = fill_addr(d->cfg->socket_path, &sa, err);
	if (r == 0 && path_parent(d->cfg->socket_path, dir, sizeof(dir), NULL) < 0)
		r = dg_error_set(err, DG_E_INVALID, EINVAL, "socket path '%s' has no directory",
				 d->cfg->socket_path);
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
	/*
	 * Every connection inherits SO_PASSCRED: each chunk a client writes
	 * then carries the writer's credentials (client_recv checks them).
	 */
	if (r < 0 || listen(fd, LISTEN_BACKLOG) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int)) < 0) {
		r = dg_error_set(err, DG_E_INTERNAL, errno, "cannot listen on %s: %m",
				 d->cfg->socket_path);
		close(fd);
		return r;
	}
	d->listen_fd = fd;
	d->admit = calloc(1, sizeof(*d->admit));
	if (!d->admit)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	admit_init(d->admit, &(struct admit_limits){
				     .max_clients = d->cfg->max_clients,
				     .per_uid = d->cfg->clients_per_uid,
				     .streams_per_uid = d->cfg->streams_per_uid,
				     .reserved = d->cfg->reserved_clients,
			     });
	return socket_access(d, err);
}

/*
 * Stops accepting new clients (pause) or starts again. devgated pauses
 * when it runs out of file descriptors, and goes on once one is freed.
 */
static void listen_pause(struct daemon *d, bool pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.u64 = TAG_LISTEN };

	if (d->listen_paused == pause || d->listen_fd < 0 || d->epfd < 0)
		return;
	if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->listen_fd, &ev) == 0)
		d->listen_paused = pause;
}

/* Closes c's connection and frees it; a grant it had waiting is cancelled. */
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
		waiting_cancel(d->waiting, c->wait, "the client left");
	byname_job_free(d, c->job);
	admit_del(d->admit, c->peer.uid, c->peer.authority, c->stream != DG_OP_MAX);
	(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	peer_done(&c->peer);
	dg_linebuf_free(&c->in);
	free(c->out);
	/* A status of thousands of leases would stay in malloc's free lists. */
	if (c->out_cap > OUT_HIGH)
		(void)malloc_trim(0);
	free(c);
	listen_pause(d, false); /* a descriptor is free again */
}

void server_close(struct daemon *d)
{
	while (d->clients) {
		struct client *c = d->clients;

		/* Its client sees the connection close: "the request was not served". */
		if (c->wait)
			waiting_cancel(d->waiting, c->wait, "devgated stops");
		c->wait = NULL;
		client_free(d, c);
	}
	if (d->listen_fd >= 0) {
		d->listen_fd = safe_close(d->listen_fd);
		(void)unlink(d->cfg->socket_path);
	}
	if (d->admit)
		admit_free(d->admit);
	free(d->admit);
	d->admit = NULL;
}

/* Returns how many bytes of c's replies are not written yet. */
static size_t pending(const struct client *c)
{
	return c->out_len - c->out_off;
}

/*
 * Asks epoll for the events c needs now: readable while few of its replies
 * wait to be written, writable while any do.
 */
static void client_arm(struct daemon *d, struct client *c)
{
	/* A waiter sends nothing until answered: only its hangup (Ctrl-C) matters. */
	uint32_t in = c->wait || c->job ? EPOLLRDHUP : pending(c) < OUT_HIGH ? EPOLLIN : 0;
	uint32_t want = in | (pending(c) ? EPOLLOUT : 0);
	struct epoll_event ev = { .events = want, .data.ptr = c };

	if (want != c->armed && epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->armed = want;
}

/*
 * Writes as much of c's unsent replies as the socket takes now, without
 * blocking. Returns < 0 when the client is gone.
 */
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

/*
 * Queues msg as one line for c and writes what the socket takes; never
 * blocks. Returns < 0 when c must be cut: the line is more than a client
 * reads, or c stopped reading its replies.
 */
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

/* Sends err as one error line on fd, best effort and without blocking: the peer gets no more. */
static void refuse(int fd, const struct dg_error *err)
{
	auto_json json_object *msg = dg_reply_error(err);
	const char *s = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	char line[sizeof(err->message) + sizeof(err->hint) + 256];
	int len = snprintf(line, sizeof(line), "%s\n", s);

	if (len > 0 && (size_t)len < sizeof(line))
		(void)send(fd, line, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Tells a peer that may not use devgated why, in one error line, before it is cut. */
static void refuse_peer(int fd, const struct peer *p)
{
	struct dg_error err = { 0 };

	dg_error_set(&err, DG_E_PERM, EACCES, "devgated does not serve uid %u",
		     (unsigned int)p->uid);
	dg_error_hint(&err, "run devgatectl as root, or join devgated's socket-group (read) or "
			    "admin-group (grant and revoke)");
	refuse(fd, &err);
}

/*
 * Whether a line about a refused or cut connection may be logged now: one
 * a second, so that a flood of connections cannot flood the log. *ret_quiet
 * is how many went unlogged since the last one.
 */
static bool admit_log_due(struct daemon *d, unsigned int *ret_quiet)
{
	uint64_t now = now_mono_ns();

	if (d->admit->logged_ns && now - d->admit->logged_ns < ADMIT_LOG_NS) {
		d->admit->unlogged++;
		return false;
	}
	*ret_quiet = d->admit->unlogged;
	d->admit->logged_ns = now;
	d->admit->unlogged = 0;
	return true;
}

/*
 * What a connection is worth keeping when a newcomer needs its slot: the
 * lowest goes first. A connection is idle once it has sent no complete
 * request for IDLE_GRACE_NS and devgated has read all it sent: a
 * half-sent request, or a client that keeps a connection it does not use.
 */
enum worth {
	WORTH_IDLE_READER,
	WORTH_IDLE_ADMIN,
	WORTH_READER_STREAM,
	WORTH_KEEP, /* root's, a waiting grant's, an admin's stream, a busy one */
};

/* Its worth, short of the FIONREAD that least_valuable asks only of a candidate. */
static enum worth worth_of(const struct client *c, uint64_t now)
{
	if (c->peer.uid == 0 || c->wait)
		return WORTH_KEEP;
	if (c->stream != DG_OP_MAX)
		return c->peer.authority == PEER_READER ? WORTH_READER_STREAM : WORTH_KEEP;
	if (now - c->last_ns < IDLE_GRACE_NS)
		return WORTH_KEEP;
	return c->peer.authority == PEER_READER ? WORTH_IDLE_READER : WORTH_IDLE_ADMIN;
}

/* Whether c goes before best, both worth w: the longest idle, or the newest stream. */
static bool goes_before(const struct client *c, const struct client *best, enum worth w)
{
	return w == WORTH_READER_STREAM ? c->last_ns > best->last_ns : c->last_ns < best->last_ns;
}

/* Whether the client sent bytes devgated has not read yet: a request, not idleness. */
static bool has_unread(const struct client *c)
{
	int unread = 0;

	return ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0;
}

/*
 * Returns the connection to cut for a newcomer with authority auth, or
 * NULL: a reader may take only another reader's idle slot; an admin any
 * idle slot but root's, or a reader's stream.
 */
static struct client *least_valuable(struct daemon *d, enum peer_authority auth)
{
	enum worth limit = auth == PEER_READER ? WORTH_IDLE_ADMIN : WORTH_KEEP;
	uint64_t now = now_mono_ns();
	struct client *best = NULL;
	enum worth best_w = limit;

	for (struct client *c = d->clients; c; c = c->next) {
		enum worth w = worth_of(c, now);

		if (w >= limit || w > best_w || (best && w == best_w && !goes_before(c, best, w)))
			continue;
		if (w != WORTH_READER_STREAM && has_unread(c))
			continue;
		best = c;
		best_w = w;
	}
	return best;
}

/* Fills err with why a peer gets no slot under verdict v. */
static void admit_error(const struct daemon *d, enum admit_verdict v, const struct peer *p,
			struct dg_error *err)
{
	if (v == ADMIT_NO_UID) {
		dg_error_set(
			err, DG_E_UNREACHABLE, EUSERS,
			"uid %u holds %u connections to devgated already (max-clients-per-uid)",
			(unsigned int)p->uid, d->admit->lim.per_uid);
		dg_error_hint(err,
			      "close some first, or ask the admin to raise max-clients-per-uid");
	} else if (v == ADMIT_NEED_READER) {
		dg_error_set(err, DG_E_UNREACHABLE, EUSERS,
			     "socket-group members hold %zu connections already, all busy "
			     "(max-clients less reserved-clients)",
			     d->admit->readers);
		dg_error_hint(err, "try again later; the other slots are kept for root and "
				   "admin-group");
	} else {
		dg_error_set(err, DG_E_UNREACHABLE, EUSERS,
			     "devgated serves %zu connections already, all busy (max-clients)",
			     d->n_clients);
		dg_error_hint(err, "try again later, or ask the admin to raise max-clients");
	}
}

/*
 * Finds a slot for the peer of an accepted connection, cutting a less
 * valuable connection when the verdict asks for room. A uid over its
 * limit is refused on its credentials alone, before its groups are read
 * and a pidfd taken: a flood of its connections costs devgated little.
 * Returns 0 when it may be served, or < 0 after telling it why not.
 */
static int admit_peer(struct daemon *d, int fd, struct peer *p)
{
	enum admit_verdict v = ADMIT_NO_UID;
	struct client *victim = NULL;
	struct dg_error err = { 0 };
	unsigned int quiet = 0;

	if (!admit_uid_full(d->admit, p->uid)) {
		peer_authorize(fd, d->cfg->socket_gid, d->cfg->admin_gid, p);
		if (p->authority == PEER_NONE) {
			refuse_peer(fd, p);
			return -EACCES;
		}
		v = admit_check(d->admit, p->uid, p->authority);
		if (v == ADMIT_YES)
			return admit_add(d->admit, p->uid, p->authority);
		victim = least_valuable(d, p->authority);
	}
	if (victim) {
		if (admit_log_due(d, &quiet))
			log_info("cut client uid %u pid %d%s: %s, to make room for uid %u "
				 "(%u more cut or refused since the last line)",
				 (unsigned int)victim->peer.uid, (int)victim->peer.pid,
				 peer_pid_note(victim->peer.pidfd),
				 victim->stream != DG_OP_MAX ? "a reader's stream"
							     : "no complete request",
				 (unsigned int)p->uid, quiet);
		client_free(d, victim);
		return admit_add(d->admit, p->uid, p->authority);
	}
	admit_error(d, v, p, &err);
	if (admit_log_due(d, &quiet))
		log_info("refused a connection of uid %u pid %d: %s (%u more cut or refused since "
			 "the last line)",
			 (unsigned int)p->uid, (int)p->pid, err.message, quiet);
	refuse(fd, &err);
	return -EUSERS;
}

/*
 * Adds a client for the accepted connection fd, counted in its slot
 * already. Takes fd and the peer's pidfd, and closes both when it cannot.
 */
static void client_add(struct daemon *d, int fd, struct peer *p)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct client *c = calloc(1, sizeof(*c));

	if (!c) {
		admit_del(d->admit, p->uid, p->authority, false);
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
		admit_del(d->admit, c->peer.uid, c->peer.authority, false);
		close(fd);
		peer_done(&c->peer);
		free(c);
		return;
	}
	c->next = d->clients;
	d->clients = c;
	d->n_clients++;
}

/*
 * Accepts every connection first, since who the peer is can be read only
 * after accept, then gives it a slot or refuses it with the reason. The
 * listening socket stays polled (level-triggered): a connection left in
 * the listen queue after ACCEPT_BURST is taken at the next turn.
 */
void server_accept(struct daemon *d)
{
	for (int i = 0; i < ACCEPT_BURST; i++) {
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
		if (peer_identify(fd, &p) < 0 || admit_peer(d, fd, &p) < 0) {
			close(fd);
			peer_done(&p);
			continue;
		}
		client_add(d, fd, &p);
	}
}

/* Returns who c is, as ops.c wants to know it. */
static struct ops_peer ops_peer_of(const struct client *c)
{
	return (struct ops_peer){ .uid = c->peer.uid,
				  .pid = c->peer.pid,
				  .pidfd = c->peer.pidfd,
				  .admin = c->peer.authority == PEER_ADMIN };
}

/*
 * Puts c's grant, refused for busy GPUs (reason), in the wait queue if it
 * may wait there. Returns 0 when it waits: the request is the queue's then.
 */
static int client_wait(struct daemon *d, struct client *c, struct dg_request *req,
		       const char *reason, struct dg_error *err)
{
	struct ops_peer peer = ops_peer_of(c);
	int pidfd = -1;
	int r = ops_wait_check(d, &peer, req, &pidfd, err);

	if (r == 0)
		r = waiting_add(d->waiting, c, c->peer.uid, req, pidfd, reason, &c->wait, err);
	return r;
}

static int serve(struct daemon *d, struct client *c, struct dg_request *rq, int r,
		 struct dg_error *rerr);
static int client_lines(struct daemon *d, struct client *c);

/* Numbers the name lookups' epoll tags (TAG_LOOKUP); devgated has one loop. */
static uint64_t lookup_seq;

/*
 * Ends c's name lookup (late: its time ran out) and serves its request as
 * if the name had been resolved at once; then c's next lines. Frees c when
 * it must be cut.
 */
static void lookup_end(struct daemon *d, struct client *c, bool late)
{
	struct byname_job *j = c->job;
	struct dg_error err = { 0 };
	struct dg_request req;
	int r;

	c->job = NULL;
	r = byname_finish(d, j, late, &req, &err);
	if (serve(d, c, &req, r, &err) < 0 || client_lines(d, c) < 0)
		client_free(d, c);
	else
		client_arm(d, c);
}

void server_lookup_event(struct daemon *d, uint64_t tag)
{
	/* A client that left took its job along: its tag matches none. */
	for (struct client *c = d->clients; c; c = c->next) {
		if (c->job && byname_job_tag(c->job) == tag) {
			lookup_end(d, c, false);
			return;
		}
	}
}

/*
 * Serves one request line from c: decodes it, dispatches it and queues the
 * reply. A grant that may wait for busy GPUs goes in the wait queue instead
 * and is answered later. Returns < 0 when c must be cut.
 */
static int handle_line(struct daemon *d, struct client *c, const char *line)
{
	struct ops_peer peer = ops_peer_of(c);
	struct dg_request req;
	struct dg_error err = { 0 };
	auto_json json_object *msg = NULL;
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
	if (ops_streams(&req) && admit_stream_check(d->admit, c->peer.uid) != ADMIT_YES) {
		unsigned int quiet = 0;

		dg_error_set(&err, DG_E_UNREACHABLE, EUSERS,
			     "uid %u has %u streams open already (max-streams-per-uid)",
			     (unsigned int)c->peer.uid, d->admit->lim.streams_per_uid);
		dg_error_hint(&err, "end a watch or events --follow first, or ask the admin to "
				    "raise max-streams-per-uid");
		if (admit_log_due(d, &quiet))
			log_info("refused a stream of uid %u pid %d%s: %s (%u more cut or refused "
				 "since the last line)",
				 (unsigned int)c->peer.uid, (int)c->peer.pid,
				 peer_pid_note(c->peer.pidfd), err.message, quiet);
		dg_request_done(&req);
		msg = dg_reply_error(&err);
		return client_send(c, msg);
	}
	/* Runtimes are asked only for those who may change leases, by a worker. */
	r = peer.admin ? byname_start(d, &req, TAG_LOOKUP | ++lookup_seq, &c->job, &err) : 0;
	/* Parked: server_lookup_event serves it once the worker ended. */
	return r > 0 ? 0 : serve(d, c, &req, r, &err);
}

/*
 * Serves req for c, whose name lookup ended with r (and err when < 0), and
 * queues the reply, or puts a grant that may wait in the wait queue.
 * Returns < 0 when c must be cut.
 */
static int serve(struct daemon *d, struct client *c, struct dg_request *rq, int r,
		 struct dg_error *rerr)
{
	struct ops_peer peer = ops_peer_of(c);
	struct dg_request req = *rq;
	struct dg_error err = *rerr;
	struct dg_arena arena = { 0 };
	auto_json json_object *msg = NULL;
	union dg_reply reply;

	if (r < 0)
		metrics_request_failed(d->metrics, req.op, err.code);
	else
		r = ops_dispatch(d, &peer, &req, &reply, &arena, &err);
	if (ops_may_wait(&req, r, &err)) {
		struct dg_error busy = err;

		err = (struct dg_error){ 0 };
		r = client_wait(d, c, &req, busy.message, &err);
		if (r == 0) {
			dg_arena_free(&arena);
			return 0;
		}
	}
	msg = r < 0 ? dg_reply_error(&err) : dg_reply_encode(req.op, &reply);
	if (r == 0 && ops_streams(&req)) {
		c->stream = req.op;
		admit_stream(d->admit, c->peer.uid);
	}
	dg_request_done(&req);
	dg_arena_free(&arena);
	return client_send(c, msg);
}

/*
 * Serves c's complete request lines in order, as long as c reads its
 * replies and has no grant waiting. Returns < 0 when c must be cut.
 */
static int client_lines(struct daemon *d, struct client *c)
{
	while (pending(c) < OUT_HIGH && !c->wait && !c->job) {
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

/*
 * Reads what c sent into buf, as read(2) does, and checks who wrote it:
 * the kernel tells the writer's credentials with each chunk (SO_PASSCRED),
 * and one recvmsg never mixes two writers. A connection's authority is
 * its connecting uid's, so bytes written by another uid (a descriptor
 * passed on, or a process that dropped root after connecting) are refused:
 * -EPERM, with *ret_uid the writer's uid.
 */
static ssize_t client_recv(const struct client *c, char *buf, size_t len, uid_t *ret_uid)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
	bool known = false;

	if (n <= 0)
		return n < 0 ? -errno : 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		struct ucred cred;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_CREDENTIALS ||
		    h->cmsg_len != CMSG_LEN(sizeof(cred)))
			continue;
		memcpy(&cred, CMSG_DATA(h), sizeof(cred));
		*ret_uid = cred.uid;
		known = true;
	}
	/* No credentials: SO_PASSCRED is set on every connection, so never expected. */
	if (!known)
		*ret_uid = (uid_t)-1;
	return known && *ret_uid == c->peer.uid ? n : -EPERM;
}

/* Tells c that a process of uid wrote on its connection, then it is cut. */
static void client_foreign(struct client *c, uid_t uid)
{
	struct dg_error err = { 0 };
	auto_json json_object *msg = NULL;

	log_warning("cut client uid %u pid %d%s: a process of uid %d wrote on its connection",
		    (unsigned int)c->peer.uid, (int)c->peer.pid, peer_pid_note(c->peer.pidfd),
		    (int)uid);
	dg_error_set(&err, DG_E_PERM, EPERM,
		     "this connection was made by uid %u; a process of uid %d may not write on it",
		     (unsigned int)c->peer.uid, (int)uid);
	dg_error_hint(&err, "connect to devgated from the process that sends the requests");
	msg = dg_reply_error(&err);
	(void)client_send(c, msg);
}

/*
 * Reads what c sent and serves the complete lines. Returns < 0 when c hung
 * up, sent a line longer than a request may be, or another uid wrote.
 */
static int client_read(struct daemon *d, struct client *c)
{
	char buf[16384];
	uid_t writer = 0;
	ssize_t n = client_recv(c, buf, sizeof(buf), &writer);

	if (n == -EAGAIN || n == -EINTR)
		return 0;
	if (n == -EPERM) {
		client_foreign(c, writer);
		return -EPERM;
	}
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
	uint64_t now = now_mono_ns(), limit = (uint64_t)d->cfg->client_timeout_ms * 1000000;
	struct client *c = d->clients, *next;

	for (; c; c = next) {
		next = c->next;
		/* Streams wait for events as long as they like; requests do not. */
		if (c->job && byname_job_late(c->job, now)) {
			lookup_end(d, c, true);
			continue;
		}
		if (c->stream == DG_OP_MAX && !c->wait && !c->job && now - c->last_ns > limit) {
			if (pending(c))
				log_info(
					"cut client uid %u pid %d%s: it stopped reading (%zu bytes "
					"queued for %u ms)",
					(unsigned int)c->peer.uid, (int)c->peer.pid,
					peer_pid_note(c->peer.pidfd), pending(c),
					d->cfg->client_timeout_ms);
			else
				log_info(
					"cut client uid %u pid %d%s: no complete request for %u ms",
					(unsigned int)c->peer.uid, (int)c->peer.pid,
					peer_pid_note(c->peer.pidfd), d->cfg->client_timeout_ms);
			client_free(d, c);
		}
	}
	byname_reap();
	/* Descriptors may have been freed elsewhere since accept ran out. */
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
 * What the wait queue asks of the server (struct waiting_ops); ctx is the
 * daemon and client a struct client whose grant waits.
 */
static int wait_retry(void *ctx, void *client, const struct dg_request *req, union dg_reply *reply,
		      struct dg_arena *a, struct dg_error *err)
{
	struct ops_peer peer = ops_peer_of(client);
	int r = ops_dispatch(ctx, &peer, req, reply, a, err);

	return ops_may_wait(req, r, err) ? WAITING_BUSY : r;
}

static bool wait_gone(void *ctx, const struct dg_target_args *target, int pidfd)
{
	return grant_target_gone(ctx, target, pidfd);
}

static int wait_tell(void *ctx, void *client, json_object *msg)
{
	if (client_send(client, msg) < 0) {
		client_free(ctx, client); /* its waiter is cancelled there */
		return -ECONNRESET;
	}
	client_arm(ctx, client);
	return 0;
}

static void wait_answer(void *ctx, void *client, json_object *msg)
{
	struct client *c = client;

	c->wait = NULL; /* the queue let go of it */
	if (client_send(c, msg) < 0 || client_lines(ctx, c) < 0)
		client_free(ctx, c);
	else
		client_arm(ctx, c);
}

const struct waiting_ops server_waiting_ops = {
	.retry = wait_retry,
	.gone = wait_gone,
	.tell = wait_tell,
	.answer = wait_answer,
};
