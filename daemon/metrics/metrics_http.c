// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>

#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "util.h"

#define HTTP_CONN_LIMIT 16
#define HTTP_CONN_TIMEOUT_S 10
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_http {
	struct MHD_Daemon *mhd;
};

static int parse_host_port(const char *s, char *host, size_t host_len, uint32_t *port,
			   bool *bracketed)
{
	const char *sep;
	size_t len;

	*bracketed = s[0] == '[';
	if (*bracketed) {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		s++;
		len = (size_t)(end - s);
		sep = end + 1;
	} else {
		sep = strrchr(s, ':');
		if (!sep)
			return -EINVAL;
		len = (size_t)(sep - s);
	}
	if (len == 0 || len >= host_len)
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (parse_u32(sep + 1, port) < 0 || *port == 0 || *port > 65535)
		return -EINVAL;
	return 0;
}

int metrics_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
	char host[INET6_ADDRSTRLEN];
	struct sockaddr_storage ss = { 0 };
	bool bracketed;
	uint32_t port;
	int r = parse_host_port(s, host, sizeof(host), &port, &bracketed);

	if (r < 0)
		return r;
	if (bracketed) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin);
	}
	*ret = ss;
	return 0;
}

/* ---- the registry ---- */

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

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned int status,
				    const char *text, bool allow)
{
	/* PERSISTENT: MHD neither copies nor frees a static string. */
	return respond(conn, status, (char *)text, strlen(text), MHD_RESPMEM_PERSISTENT, allow);
}

static enum MHD_Result http_request(void *cls, struct MHD_Connection *conn, const char *url,
				    const char *method, const char *version,
				    const char *upload_data, size_t *upload_data_size,
				    void **req_cls)
{
	struct daemon *d = cls;
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
	r = metrics_render(d, &doc, &len);
	if (r < 0) {
		log_error_errno(r, "cannot render metrics: %m");
		return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot render metrics; see devgated's log\n", false);
	}
	return respond(conn, MHD_HTTP_OK, doc, len, MHD_RESPMEM_MUST_FREE, false);
}

int metrics_http_start(struct daemon *d, const char *listen, struct dg_error *err)
{
	struct sockaddr_storage ss;
	socklen_t ss_len;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	uint16_t port;

	if (metrics_parse_listen(listen, &ss, &ss_len) < 0) {
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
	d->http = calloc(1, sizeof(*d->http));
	if (!d->http)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	/* No MHD_USE_INTERNAL_POLLING_THREAD: devgated must stay single-threaded. */
	/* The logger first, or MHD logs the other options' problems itself. */
	d->http->mhd = MHD_start_daemon(flags, port, NULL, NULL, http_request, d,
					MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL,
					MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
					MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONN_LIMIT,
					MHD_OPTION_CONNECTION_TIMEOUT,
					(unsigned int)HTTP_CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!d->http->mhd) {
		dg_error_set(err, DG_E_INTERNAL, EADDRNOTAVAIL, "cannot serve metrics on %s",
			     listen);
		dg_error_hint(err,
			      "is the address local and the port free? the log above says more");
		return -EADDRNOTAVAIL;
	}
	log_info("serving Prometheus metrics at http://%s/metrics", listen);
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
