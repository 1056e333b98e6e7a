// SPDX-License-Identifier: Apache-2.0
/*
 * devgate-k8s as a read-only client of devgated (see devgated.h): list and
 * the watch stream, decoded through the wire schemas. It never asks for a
 * grant; kubelet's containers get their GPUs through CDI and the hook.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "devgated.h"

struct k8s_watch {
	struct client_conn conn;
};

static int failed(int r, const struct dg_error *err, char *why, size_t why_len)
{
	snprintf(why, why_len, "%s", err->message[0] ? err->message : strerror(-r));
	return r;
}

int k8s_devgated_list(const char *socket_path, unsigned int timeout_s, struct k8s_devices *ret,
		      char *why, size_t why_len)
{
	struct dg_request req = { .op = DG_OP_LIST };
	struct dg_error err = { 0 };
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	int r = client_request(socket_path, timeout_s, &req, &reply, &arena, &err);

	if (r == 0) {
		r = k8s_devices_from_list(&reply.list, ret);
		if (r == -E2BIG) {
			snprintf(why, why_len, "devgated lists %zu GPUs; kept the first %d",
				 reply.list.n_gpus, K8S_MAX_DEVICES);
			r = 0;
		}
	} else {
		(void)failed(r, &err, why, why_len);
	}
	dg_arena_free(&arena);
	return r;
}

int k8s_watch_open(const char *socket_path, unsigned int timeout_s, struct k8s_watch **ret,
		   char *why, size_t why_len)
{
	struct dg_request req = { .op = DG_OP_WATCH };
	struct dg_error err = { 0 };
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	struct k8s_watch *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->conn.fd = -1;
	r = client_connect(socket_path, timeout_s, &w->conn, &err);
	if (r == 0)
		r = client_call(&w->conn, &req, &reply, &arena, &err);
	dg_arena_free(&arena);
	if (r == 0 && fcntl(w->conn.fd, F_SETFL, O_NONBLOCK) < 0)
		r = dg_error_set(&err, DG_E_INTERNAL, errno, "fcntl: %m");
	if (r < 0) {
		k8s_watch_free(w);
		return failed(r, &err, why, why_len);
	}
	*ret = w;
	return 0;
}

int k8s_watch_fd(const struct k8s_watch *w)
{
	return w->conn.fd;
}

int k8s_watch_read(struct k8s_watch *w)
{
	for (;;) {
		struct dg_error err = { 0 };
		struct dg_arena arena = { 0 };
		union dg_stream_event ev;
		char *line = NULL;
		int r = dg_recv_line(w->conn.fd, &w->conn.in, &line);

		if (r == -EAGAIN || r == -EWOULDBLOCK)
			return 0;
		if (r < 0)
			return r;
		r = dg_event_decode(DG_OP_WATCH, line, &ev, &arena, &err);
		free(line);
		dg_arena_free(&arena);
		if (r < 0)
			return r;
	}
}

void k8s_watch_free(struct k8s_watch *w)
{
	if (!w)
		return;
	client_close(&w->conn);
	free(w);
}
