// SPDX-License-Identifier: Apache-2.0
/*
 * The /metrics HTTP endpoint: libmicrohttpd without threads, run from
 * devgated's epoll loop. It answers GET and HEAD of /metrics with the page
 * its render callback makes, and 404 or 405 to anything else. It must not
 * know what is on the page, nor start a thread: devgated is single-threaded.
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>

#include "log.h"
#include "metrics_http.h"
#include "sys/listen_addr.h"

#define HTTP_CONN_LIMIT 16
#define HTTP_CONN_TIMEOUT_S 10
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_http {
	struct MHD_Daemon *mhd;
	metrics_http_render_fn render; /* makes the page, with ctx */
	void *ctx;
};

/* libmicrohttpd's messages, into devgated's log as warnings. */
__attribute__((format(printf, 2, 0))) static void http_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t len;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	len = strlen(buf);
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	log_warning("metrics endpoint: %s", buf);
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

/* One request: the page for GET or HEAD of /metrics, an error for the rest. */
static enum MHD_Result http_request(void *cls, struct MHD_Connection *conn, const char *url,
				    const char *method, const char *version,
				    const char *upload_data, size_t *upload_data_size,
				    void **req_cls)
{
	const struct metrics_http *h = cls;
	char *doc = NULL;
	size_t len = 0;
	int r;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only\n", true);
	if (strcmp(url, "/metrics") != 0)
		return respond_text(conn, MHD_HTTP_NOT_FOUND, "devgated serves /metrics only\n",
				    false);
	r = h->render(h->ctx, &doc, &len);
	if (r < 0) {
		log_error_errno(r, "cannot render metrics: %m");
		return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot render metrics; see devgated's log\n", false);
	}
	return respond(conn, MHD_HTTP_OK, doc, len, MHD_RESPMEM_MUST_FREE, false);
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
				  MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL, MHD_OPTION_SOCK_ADDR,
				  (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned int)HTTP_CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
				  (unsigned int)HTTP_CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!h->mhd) {
		free(h);
		dg_error_set(err, DG_E_INTERNAL, EADDRNOTAVAIL, "cannot serve metrics on %s",
			     listen);
		dg_error_hint(err,
			      "is the address local and the port free? the log above says more");
		return -EADDRNOTAVAIL;
	}
	log_info("serving Prometheus metrics at http://%s/metrics", listen);
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
	MHD_UNSIGNED_LONG_LONG ms;

	if (!h || !h->mhd || MHD_get_timeout(h->mhd, &ms) != MHD_YES)
		return -1;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

void metrics_http_run(struct metrics_http *h)
{
	if (h && h->mhd)
		(void)MHD_run(h->mhd);
}

void metrics_http_free(struct metrics_http *h)
{
	if (!h)
		return;
	if (h->mhd)
		MHD_stop_daemon(h->mhd);
	free(h);
}
