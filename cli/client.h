/* SPDX-License-Identifier: Apache-2.0 */
/* Talking to devgated: connect, one request, one reply; or a stream. */
#ifndef DEVGATE_CLIENT_H
#define DEVGATE_CLIENT_H

#include <json-c/json.h>

#include "errors.h"
#include "wire.h"

#define CLIENT_TIMEOUT_S 10

/* A grant --wait's place in the queue, as devgated reports it before the reply. */
typedef void (*client_wait_fn)(void *ctx, const struct dg_wait_event *ev);

struct client_conn {
	int fd;
	unsigned int timeout_s;
	struct dg_linebuf in;
	client_wait_fn on_wait; /* NULL: places are not shown */
	void *wait_ctx;
};

/* Connects within timeout_s seconds, which also bounds each reply (0: 10 s). */
int client_connect(const char *socket_path, unsigned int timeout_s, struct client_conn *ret,
		   struct dg_error *err);
void client_close(struct client_conn *c);

/* Sends req and decodes the reply into reply (its strings in a). */
int client_call(struct client_conn *c, const struct dg_request *req, union dg_reply *reply,
		struct dg_arena *a, struct dg_error *err);
/* One-shot: connect, call, close. */
int client_request(const char *socket_path, unsigned int timeout_s, const struct dg_request *req,
		   union dg_reply *reply, struct dg_arena *a, struct dg_error *err);
/* The same, with on_wait told each place of a waiting grant (may be NULL). */
int client_request_wait(const char *socket_path, unsigned int timeout_s,
			const struct dg_request *req, client_wait_fn on_wait, void *ctx,
			union dg_reply *reply, struct dg_arena *a, struct dg_error *err);
/* Next event of op's stream; -ECONNRESET when the daemon closed it. */
int client_next_event(struct client_conn *c, enum dg_op op, union dg_stream_event *ev,
		      struct dg_arena *a, struct dg_error *err);

#endif
