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
 * A grant with "wait" that cannot be served at once sends event lines
 * (its place in the queue) first, then its one reply.
 *
 * The op table in wire.c is the single definition of every operation, its
 * arguments, its reply and its events; both ends decode through it and
 * reject unknown fields.
 */
#ifndef DEVGATE_PROTOCOL_H
#define DEVGATE_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

#include "errors.h"

#define DG_PROTO_VERSION 1
/*
 * A request line is small; a reply grows with the leases it lists (status:
 * ~0.5 KiB a lease), so a reader of replies allows far more.
 */
#define DG_MSG_MAX ((size_t)1024 * 1024)
#define DG_REPLY_MAX ((size_t)64 * 1024 * 1024)
#include "paths.h"

/* grant --priority: the queue serves higher first. */
#define DG_PRIORITY_MIN (-1000)
#define DG_PRIORITY_MAX 1000

enum dg_op {
	DG_OP_PING,
	DG_OP_LIST,
	DG_OP_GRANT,
	DG_OP_REVOKE,
	DG_OP_STATUS,
	DG_OP_WATCH,
	DG_OP_METRICS,
	DG_OP_EVENTS,
	DG_OP_RESCAN,
	DG_OP_EXTEND,
	DG_OP_MOVE,
	DG_OP_QUEUE,
	DG_OP_RELOAD,
	DG_OP_CONTAINERS,
	DG_OP_MAX,
};

struct dg_schema;

/* One operation: what it takes, answers and streams (table in wire.c). */
struct dg_op_info {
	const char *name;
	const struct dg_schema *args;
	const struct dg_schema *reply;
	const struct dg_schema *event; /* NULL: does not stream */
	bool changes;		       /* changes leases: needs the admin's authority */
};

const struct dg_op_info *dg_op_info(enum dg_op op);
int dg_op_from_name(const char *name, enum dg_op *ret);

/* One JSON object in this side's protocol version, or NULL with err set. */
json_object *dg_message_parse(const char *line, struct dg_error *err);

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
	size_t max; /* longest line accepted; 0: DG_MSG_MAX */
};

void dg_linebuf_free(struct dg_linebuf *lb);
/* Appends bytes; -EMSGSIZE when a line would exceed lb->max. */
int dg_linebuf_append(struct dg_linebuf *lb, const char *data, size_t len);
/* Pops one complete line (without '\n') into *ret (malloc'd); 0 if none. */
int dg_linebuf_pop(struct dg_linebuf *lb, char **ret);

/* Writes msg as one line; blocking, restarts on EINTR. */
int dg_send(int fd, json_object *msg);
/* Blocking read of one line; -ECONNRESET on EOF before a full line. */
int dg_recv_line(int fd, struct dg_linebuf *lb, char **ret);

#endif
