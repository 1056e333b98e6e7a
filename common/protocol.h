/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgate wire protocol: one JSON object per line over a unix stream socket.
 *
 *   request: {"v": 1, "op": "grant", "args": {...}}
 *   reply:   {"v": 1, "ok": true, "result": {...}}
 *            {"v": 1, "ok": false, "error": {"code": ..., "message": ..., "hint": ...}}
 *
 * Streaming operations (watch, events) answer with one reply, then one
 * {"v": 1, "event": {...}} line per event until either side closes.
 *
 * The op table below is the single definition of every operation and its
 * arguments; both ends validate through it and reject unknown fields.
 */
#ifndef DEVGATE_PROTOCOL_H
#define DEVGATE_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

#include "errors.h"

#define DG_PROTO_VERSION 1
#define DG_MSG_MAX ((size_t)1024 * 1024)
#define DG_DEFAULT_SOCKET "/run/devgate/devgated.sock"

enum dg_op {
	DG_OP_PING,
	DG_OP_LIST,
	DG_OP_GRANT,
	DG_OP_REVOKE,
	DG_OP_STATUS,
	DG_OP_WATCH,
	DG_OP_METRICS,
	DG_OP_EVENTS,
	DG_OP_MAX,
};

struct dg_field {
	const char *name;
	json_type type;
	bool required;
};

struct dg_op_info {
	const char *name;
	const struct dg_field *fields; /* terminated by a NULL name */
	bool stream; /* may turn the connection into a stream (events: with follow) */
};

const struct dg_op_info *dg_op_info(enum dg_op op);
int dg_op_from_name(const char *name, enum dg_op *ret);

/* Builds a request; takes ownership of args (may be NULL). */
json_object *dg_request_new(enum dg_op op, json_object *args);
/* Validates a request line; *ret_args is a new reference. */
int dg_request_parse(const char *line, enum dg_op *ret_op, json_object **ret_args,
		     struct dg_error *err);

/* Builds replies; dg_reply_ok takes ownership of result (may be NULL). */
json_object *dg_reply_ok(json_object *result);
json_object *dg_reply_error(const struct dg_error *err);
json_object *dg_event_new(json_object *event);
/*
 * Parses a reply line. On "ok", *ret_result is a new reference (possibly to
 * an empty object) and 0 is returned. On an error reply, err is filled and
 * -EREMOTEIO returned. Malformed input: DG_E_PROTOCOL and -EPROTO.
 */
int dg_reply_parse(const char *line, json_object **ret_result, struct dg_error *err);
/* Parses an event line; *ret_event is a new reference. */
int dg_event_parse(const char *line, json_object **ret_event, struct dg_error *err);

/* Line framing shared by both ends. */
struct dg_linebuf {
	char *buf;
	size_t len;
	size_t cap;
};

void dg_linebuf_free(struct dg_linebuf *lb);
/* Appends bytes; -EMSGSIZE when a line would exceed DG_MSG_MAX. */
int dg_linebuf_append(struct dg_linebuf *lb, const char *data, size_t len);
/* Pops one complete line (without '\n') into *ret (malloc'd); 0 if none. */
int dg_linebuf_pop(struct dg_linebuf *lb, char **ret);

/* Writes msg as one line; blocking, restarts on EINTR. */
int dg_send(int fd, json_object *msg);
/* Blocking read of one line; -ECONNRESET on EOF before a full line. */
int dg_recv_line(int fd, struct dg_linebuf *lb, char **ret);

#endif
