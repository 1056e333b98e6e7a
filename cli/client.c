// SPDX-License-Identifier: Apache-2.0
/*
 * devgatectl's, devgate-hook's and devgate-k8s's end of the control socket
 * (see client.h): connect, send one request line, read one reply, or read
 * a stream of events. It checks the envelope; decoding the result is the
 * caller's, through wire.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "client.h"

static int unreachable(const char *path, int e, struct dg_error *err)
{
	if (e == EACCES || e == EPERM) {
		dg_error_set(err, DG_E_PERM, e, "permission denied on devgated's socket %s", path);
		dg_error_hint(err, "devgatectl talks to devgated as root; run it with sudo");
		return -e;
	}
	dg_error_set(err, DG_E_UNREACHABLE, e, "cannot reach devgated at %s: %s", path,
		     strerror(e));
	dg_error_hint(err, "start it with 'systemctl start devgated', or run 'devgated &' as "
			   "root; -s/--socket names another socket (devgatectl also reads "
			   "DEVGATE_SOCKET)");
	return -e;
}

int client_connect(const char *socket_path, unsigned int timeout_s, struct client_conn *ret,
		   struct dg_error *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_s ? timeout_s : CLIENT_TIMEOUT_S };
	int fd;

	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG, "socket path is too long");
	memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "socket: %m");
	/* Before connect: a daemon whose backlog is full would block it for good. */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno == EINPROGRESS || errno == EAGAIN ? ETIMEDOUT : errno;

		close(fd);
		return unreachable(socket_path, e, err);
	}
	ret->fd = fd;
	ret->timeout_s = (unsigned int)tv.tv_sec;
	ret->in = (struct dg_linebuf){ .max = DG_REPLY_MAX };
	return 0;
}

void client_close(struct client_conn *c)
{
	c->fd = safe_close(c->fd);
	dg_linebuf_free(&c->in);
}

static int recv_line_error(struct client_conn *c, int r, struct dg_error *err)
{
	if (r == -ECONNRESET)
		return dg_error_set(err, DG_E_UNREACHABLE, ECONNRESET,
				    "devgated closed the connection without a reply");
	if (r == -EAGAIN || r == -EWOULDBLOCK)
		return dg_error_set(err, DG_E_UNREACHABLE, ETIMEDOUT,
				    "devgated did not answer within %u s", c->timeout_s);
	if (r < 0)
		return dg_error_set(err, DG_E_UNREACHABLE, r, "reading devgated's reply: %s",
				    strerror(-r));
	return r;
}

static int recv_line(struct client_conn *c, char **line, struct dg_error *err)
{
	int r = dg_recv_line(c->fd, &c->in, line);

	return r < 0 ? recv_line_error(c, r, err) : 0;
}

static bool waits(const struct dg_request *req)
{
	return req->op == DG_OP_GRANT && req->u.grant.has_wait;
}

/*
 * A waiting grant reads with no limit, or its wait and the usual timeout:
 * devgated answers when its time runs out.
 */
static void wait_timeout(struct client_conn *c, const struct dg_request *req)
{
	int64_t w = req->u.grant.wait;
	struct timeval tv = { .tv_sec = w ? (time_t)(w + c->timeout_s) : 0 };

	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* An event line before the reply is the waiting grant's place; 1 if line was one. */
static int wait_event(struct client_conn *c, const char *line, struct dg_error *err)
{
	struct dg_arena arena = { 0 };
	union dg_stream_event ev;
	int r;

	if (!strstr(line, "\"event\""))
		return 0;
	r = dg_event_decode(DG_OP_GRANT, line, &ev, &arena, err);
	if (r == 0 && c->on_wait)
		c->on_wait(c->wait_ctx, &ev.wait);
	dg_arena_free(&arena);
	return r < 0 ? r : 1;
}

static int recv_reply(struct client_conn *c, const struct dg_request *req, char **line,
		      struct dg_error *err)
{
	int r;

	if (!waits(req))
		return recv_line(c, line, err);
	wait_timeout(c, req);
	for (;;) {
		r = dg_recv_line(c->fd, &c->in, line);
		if (r == -ECONNRESET) {
			dg_error_set(err, DG_E_UNREACHABLE, ECONNRESET,
				     "devgated closed the connection while the grant waited; the "
				     "request was not served");
			dg_error_hint(err, "devgated may have restarted: waiting grants do not "
					   "survive that; ask again");
			return -ECONNRESET;
		}
		if (r < 0)
			return recv_line_error(c, r, err);
		r = wait_event(c, *line, err);
		if (r <= 0)
			return r;
		free(*line);
		*line = NULL;
	}
}

int client_call(struct client_conn *c, const struct dg_request *req, union dg_reply *reply,
		struct dg_arena *a, struct dg_error *err)
{
	auto_json json_object *msg = dg_request_encode(req);
	auto_free char *line = NULL;
	int r;

	r = dg_send(c->fd, msg);
	/*
	 * devgated refuses a peer it does not serve with one error line and
	 * closes at once, often before the request is sent (a busy machine):
	 * the reason is in the socket still, so it is read before giving up.
	 */
	if (r == -EPIPE || r == -ECONNRESET) {
		if (recv_reply(c, req, &line, err) < 0)
			return dg_error_set(err, DG_E_UNREACHABLE, -r,
					    "devgated closed the connection");
		return dg_reply_decode(req->op, line, reply, a, err);
	}
	if (r < 0)
		return dg_error_set(err, DG_E_UNREACHABLE, r, "sending to devgated: %s",
				    strerror(-r));
	r = recv_reply(c, req, &line, err);
	if (r < 0)
		return r;
	return dg_reply_decode(req->op, line, reply, a, err);
}

int client_request_wait(const char *socket_path, unsigned int timeout_s,
			const struct dg_request *req, client_wait_fn on_wait, void *ctx,
			union dg_reply *reply, struct dg_arena *a, struct dg_error *err)
{
	struct client_conn c = { .fd = -1 };
	int r = client_connect(socket_path, timeout_s, &c, err);

	if (r < 0)
		return r;
	c.on_wait = on_wait;
	c.wait_ctx = ctx;
	r = client_call(&c, req, reply, a, err);
	client_close(&c);
	return r;
}

int client_request(const char *socket_path, unsigned int timeout_s, const struct dg_request *req,
		   union dg_reply *reply, struct dg_arena *a, struct dg_error *err)
{
	return client_request_wait(socket_path, timeout_s, req, NULL, NULL, reply, a, err);
}

int client_next_event(struct client_conn *c, enum dg_op op, union dg_stream_event *ev,
		      struct dg_arena *a, struct dg_error *err)
{
	struct timeval tv = { 0 };
	auto_free char *line = NULL;
	int r;

	/* Streams wait as long as it takes. */
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = dg_recv_line(c->fd, &c->in, &line);
	if (r < 0)
		return r == -ECONNRESET ? r
					: dg_error_set(err, DG_E_UNREACHABLE, r,
						       "reading events: %s", strerror(-r));
	return dg_event_decode(op, line, ev, a, err);
}
