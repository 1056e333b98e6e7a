// SPDX-License-Identifier: Apache-2.0
/*
 * The /metrics HTTP endpoint: libmicrohttpd without threads, run from
 * devgated's epoll loop. It answers GET and HEAD of /metrics with the page
 * its render callback makes (kept for a second, so that scrapers cannot
 * make devgated's one thread render over and over), and 404 or 405 to
 * anything else. Any local user can connect, so every connection is
 * bounded: a request must arrive whole and its answer leave within
 * HTTP_DEADLINE_S however slowly it trickles, and a client that hung up
 * frees its slot at once (libmicrohttpd 0.9.75's edge-triggered epoll
 * misses an end that came with the request's first bytes, and would hold
 * the slot for its whole timeout).
 *
 * It must not know what is on the page, nor start a thread: devgated is
 * single-threaded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "log.h"
#include "metrics_http.h"
#include "sys/listen_addr.h"
#include "util.h"

/*
 * Connections at once, each a descriptor of devgated's. No limit by
 * address: on loopback, the usual listener, every client has the same one.
 */
#define HTTP_CONN_LIMIT 64
/*
 * A request must arrive whole, and its answer leave, within this of the
 * connection's start or of its last answer, however slowly it trickles.
 */
#define HTTP_DEADLINE_S 5
#define HTTP_DEADLINE_NS ((uint64_t)HTTP_DEADLINE_S * 1000000000)
/* A rendered page is served again for this long. */
#define HTTP_PAGE_NS (1000 * 1000000ull)
/* libmicrohttpd's messages: at most this many a second reach the log. */
#define HTTP_LOG_BURST 5
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One connection libmicrohttpd holds, from its start to its end. */
struct http_conn {
	int fd;
	uint64_t since_ns; /* accepted, or its last answer done */
	bool answering;	   /* its request is read; the answer is on its way */
	bool cut;	   /* shut down here; libmicrohttpd ends it at its next run */
	struct http_conn *prev, *next;
};

struct metrics_http {
	struct MHD_Daemon *mhd;
	metrics_http_render_fn render; /* makes the page, with ctx */
	void *ctx;
	struct http_conn *conns;
	struct MHD_Response *page; /* the last page rendered, and when */
	uint64_t page_ns;
	uint64_t log_window_ns; /* libmicrohttpd's messages logged in this second, */
	unsigned int logged;	/* and those left out since the last one logged */
	unsigned int unlogged;
};

/*
 * libmicrohttpd's messages, into devgated's log as warnings: HTTP_LOG_BURST
 * a second at most, so that a flood of broken connections cannot flood
 * the log. The next line logged says how many were left out.
 */
__attribute__((format(printf, 2, 0))) static void http_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics_http *h = cls;
	uint64_t now = now_mono_ns();
	char buf[512];
	size_t len;

	if (now - h->log_window_ns >= 1000000000ull) {
		h->log_window_ns = now;
		h->logged = 0;
	}
	if (h->logged >= HTTP_LOG_BURST) {
		h->unlogged++;
		return;
	}
	h->logged++;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	len = strlen(buf);
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (h->unlogged)
		log_warning("metrics endpoint: %s (%u more messages left out)", buf, h->unlogged);
	else
		log_warning("metrics endpoint: %s", buf);
	h->unlogged = 0;
}

/* The record of conn, made when it started; NULL when there was no memory for one. */
static struct http_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

/* A connection starts or ends: its record is made or freed. */
static void http_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			enum MHD_ConnectionNotificationCode toe)
{
	struct metrics_http *h = cls;
	struct http_conn *c = *socket_context;
	const union MHD_ConnectionInfo *info;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!c)
			return;
		if (c->prev)
			c->prev->next = c->next;
		else
			h->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		free(c);
		*socket_context = NULL;
		return;
	}
	info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	c = info ? calloc(1, sizeof(*c)) : NULL;
	if (!c)
		return; /* libmicrohttpd's own timeout still ends it */
	c->fd = info->connect_fd;
	c->since_ns = now_mono_ns();
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	*socket_context = c;
}

/* An answer is done: the connection may send its next request, within a new deadline. */
static void http_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			   enum MHD_RequestTerminationCode toe)
{
	struct http_conn *c = conn_of(conn);

	(void)cls;
	(void)req_cls;
	(void)toe;
	if (c) {
		c->answering = false;
		c->since_ns = now_mono_ns();
	}
}

/* Shuts c down: libmicrohttpd's next read sees the end and frees the slot. */
static void conn_cut(struct http_conn *c)
{
	(void)shutdown(c->fd, SHUT_RDWR);
	c->cut = true;
}

/*
 * After libmicrohttpd ran: cuts the connections past their deadline, and
 * those whose client hung up before its request was whole. The shutdown
 * wakes libmicrohttpd's epoll, which an end that came with the request's
 * first bytes did not.
 */
static void http_sweep(struct metrics_http *h)
{
	struct pollfd pfd[HTTP_CONN_LIMIT];
	struct http_conn *who[HTTP_CONN_LIMIT];
	uint64_t now = now_mono_ns();
	nfds_t n = 0;

	if (h->unlogged && now - h->log_window_ns >= 1000000000ull) {
		log_warning("metrics endpoint: %u more messages left out", h->unlogged);
		h->unlogged = 0;
	}
	for (struct http_conn *c = h->conns; c; c = c->next) {
		if (c->cut)
			continue;
		if (now - c->since_ns >= HTTP_DEADLINE_NS)
			conn_cut(c);
		else if (!c->answering && n < HTTP_CONN_LIMIT) {
			pfd[n] = (struct pollfd){ .fd = c->fd, .events = POLLRDHUP };
			who[n++] = c;
		}
	}
	if (n == 0 || poll(pfd, n, 0) <= 0)
		return;
	for (nfds_t i = 0; i < n; i++) {
		if (pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR))
			conn_cut(who[i]);
	}
}

/*
 * Queues an answer with body (freed by libmicrohttpd when mode says
 * MUST_FREE, even when this fails); allow adds the Allow header of a 405.
 */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned int status, char *body,
			       size_t len, enum MHD_ResponseMemoryMode mode, bool allow)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result r;

	if (!resp) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	if (allow)
		(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

/* Queues an answer whose body is a static string. */
static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned int status,
				    const char *text, bool allow)
{
	/* PERSISTENT: MHD neither copies nor frees a static string. */
	return respond(conn, status, (char *)text, strlen(text), MHD_RESPMEM_PERSISTENT, allow);
}

/*
 * Returns the page to answer with: the last one rendered if it is younger
 * than HTTP_PAGE_NS, else a new one. NULL, with the error logged, when
 * it cannot be made.
 */
static struct MHD_Response *http_page(struct metrics_http *h)
{
	struct MHD_Response *resp;
	char *doc = NULL;
	size_t len = 0;
	int r;

	if (h->page && now_mono_ns() - h->page_ns < HTTP_PAGE_NS)
		return h->page;
	r = h->render(h->ctx, &doc, &len);
	if (r < 0) {
		log_error_errno(r, "cannot render metrics: %m");
		return NULL;
	}
	resp = MHD_create_response_from_buffer(len, doc, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(doc);
		log_error("cannot render metrics: out of memory");
		return NULL;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	/* Each connection answered holds its own reference (MHD_queue_response). */
	if (h->page)
		MHD_destroy_response(h->page);
	h->page = resp;
	h->page_ns = now_mono_ns();
	return resp;
}

/* One request: the page for GET or HEAD of /metrics, an error for the rest. */
static enum MHD_Result http_request(void *cls, struct MHD_Connection *conn, const char *url,
				    const char *method, const char *version,
				    const char *upload_data, size_t *upload_data_size,
				    void **req_cls)
{
	struct metrics_http *h = cls;
	struct http_conn *c = conn_of(conn);
	struct MHD_Response *page;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (c)
		c->answering = true;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only\n", true);
	if (strcmp(url, "/metrics") != 0)
		return respond_text(conn, MHD_HTTP_NOT_FOUND, "devgated serves /metrics only\n",
				    false);
	page = http_page(h);
	if (!page)
		return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot render metrics; see devgated's log\n", false);
	return MHD_queue_response(conn, MHD_HTTP_OK, page);
}

/* Whether ss is a loopback address (127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104). */
static bool is_loopback(const struct sockaddr_storage *ss)
{
	const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;

	if (ss->ss_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24 == 127;
	return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

int metrics_http_start(const char *listen, metrics_http_render_fn render, void *ctx,
		       struct metrics_http **ret, struct dg_error *err)
{
	struct sockaddr_storage ss;
	socklen_t ss_len;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	struct metrics_http *h;
	uint16_t port;

	if (listen_addr_parse(listen, &ss, &ss_len) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "--metrics-listen: '%s' is not ADDR:PORT",
			     listen);
		dg_error_hint(err, "give a numeric address, e.g. 127.0.0.1:9400 or [::1]:9400");
		return -EINVAL;
	}
	if (ss.ss_family == AF_INET6) {
		flags |= MHD_USE_IPv6;
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	} else {
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	h->render = render;
	h->ctx = ctx;
	/* No MHD_USE_INTERNAL_POLLING_THREAD: devgated must stay single-threaded. */
	/* The logger first, or MHD logs the other options' problems itself. */
	h->mhd = MHD_start_daemon(flags, port, NULL, NULL, http_request, h,
				  MHD_OPTION_EXTERNAL_LOGGER, http_log, h, MHD_OPTION_SOCK_ADDR,
				  (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned int)HTTP_CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
				  (unsigned int)HTTP_DEADLINE_S, MHD_OPTION_NOTIFY_CONNECTION,
				  http_notify, h, MHD_OPTION_NOTIFY_COMPLETED, http_completed, h,
				  MHD_OPTION_END);
	if (!h->mhd) {
		free(h);
		dg_error_set(err, DG_E_INTERNAL, EADDRNOTAVAIL, "cannot serve metrics on %s",
			     listen);
		dg_error_hint(err,
			      "is the address local and the port free? the log above says more");
		return -EADDRNOTAVAIL;
	}
	log_info("serving Prometheus metrics at http://%s/metrics", listen);
	if (!is_loopback(&ss))
		log_warning("metrics endpoint %s listens beyond loopback: /metrics has no "
			    "authentication, and whoever reaches the port reads container names, "
			    "cgroups, GPU ids and device counts; bind 127.0.0.1 or [::1], or "
			    "firewall the port",
			    listen);
	*ret = h;
	return 0;
}

int metrics_http_fd(const struct metrics_http *h)
{
	const union MHD_DaemonInfo *info;

	if (!h || !h->mhd)
		return -1;
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	return info ? info->epoll_fd : -1;
}

int metrics_http_timeout(struct metrics_http *h)
{
	MHD_UNSIGNED_LONG_LONG ms = ULLONG_MAX;
	uint64_t now = now_mono_ns();
	bool any = false;

	if (!h || !h->mhd)
		return -1;
	any = MHD_get_timeout(h->mhd, &ms) == MHD_YES;
	/* The count of messages left out is logged once their second is over. */
	if (h->unlogged) {
		uint64_t end = h->log_window_ns + 1000000000ull;
		MHD_UNSIGNED_LONG_LONG left = end > now ? (end - now + 999999) / 1000000 : 0;

		ms = any && ms < left ? ms : left;
		any = true;
	}
	/* The earliest deadline of a connection not cut yet: http_sweep must run then. */
	for (const struct http_conn *c = h->conns; c; c = c->next) {
		uint64_t left = c->since_ns + HTTP_DEADLINE_NS > now
					? (c->since_ns + HTTP_DEADLINE_NS - now + 999999) / 1000000
					: 0;

		if (c->cut)
			continue;
		if (!any || left < ms)
			ms = left;
		any = true;
	}
	if (!any)
		return -1;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

void metrics_http_run(struct metrics_http *h)
{
	if (!h || !h->mhd)
		return;
	(void)MHD_run(h->mhd);
	http_sweep(h);
}

void metrics_http_free(struct metrics_http *h)
{
	if (!h)
		return;
	if (h->mhd)
		MHD_stop_daemon(h->mhd);
	if (h->page)
		MHD_destroy_response(h->page);
	free(h);
}
