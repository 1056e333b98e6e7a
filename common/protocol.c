// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "protocol.h"

#define END { NULL, json_type_null, false }

static const struct dg_field no_fields[] = { END };

static const struct dg_field list_fields[] = {
	{ "free", json_type_boolean, false },
	END,
};

/*
 * Target: exactly one of pid, cgroup or container (checked by the daemon,
 * which knows which ops accept which), and where the request comes from.
 */
#define TARGET_FIELDS                                                                              \
	{ "pid", json_type_int, false }, { "cgroup", json_type_string, false },                    \
		{ "container", json_type_string, false }, { "source", json_type_string, false }

static const struct dg_field grant_fields[] = {
	TARGET_FIELDS,
	{ "gpus", json_type_string, false },
	{ "count", json_type_int, false },
	{ "model", json_type_string, false },
	{ "arch", json_type_string, false },
	{ "product", json_type_string, false },
	{ "shared", json_type_boolean, false },
	{ "root", json_type_string, false },
	{ "from_image", json_type_boolean, false },
	END,
};

static const struct dg_field revoke_fields[] = {
	TARGET_FIELDS,
	{ "gpus", json_type_string, false },
	{ "missing_ok", json_type_boolean, false },
	END,
};

static const struct dg_field events_fields[] = {
	{ "follow", json_type_boolean, false },
	END,
};

static const struct dg_op_info op_table[DG_OP_MAX] = {
	[DG_OP_PING] = { "ping", no_fields, false },
	[DG_OP_LIST] = { "list", list_fields, false },
	[DG_OP_GRANT] = { "grant", grant_fields, false },
	[DG_OP_REVOKE] = { "revoke", revoke_fields, false },
	[DG_OP_STATUS] = { "status", no_fields, false },
	[DG_OP_WATCH] = { "watch", no_fields, true },
	[DG_OP_METRICS] = { "metrics", no_fields, false },
	[DG_OP_EVENTS] = { "events", events_fields, true },
};

const struct dg_op_info *dg_op_info(enum dg_op op)
{
	return (int)op >= 0 && op < DG_OP_MAX ? &op_table[op] : NULL;
}

int dg_op_from_name(const char *name, enum dg_op *ret)
{
	for (int i = 0; i < DG_OP_MAX; i++) {
		if (strcmp(op_table[i].name, name) == 0) {
			*ret = (enum dg_op)i;
			return 0;
		}
	}
	return -ENOENT;
}

json_object *dg_request_new(enum dg_op op, json_object *args)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "v", json_object_new_int(DG_PROTO_VERSION));
	json_object_object_add(o, "op", json_object_new_string(op_table[op].name));
	json_object_object_add(o, "args", args ? args : json_object_new_object());
	return o;
}

static int check_version(json_object *msg, struct dg_error *err)
{
	json_object *v;

	if (!json_object_object_get_ex(msg, "v", &v) || !json_object_is_type(v, json_type_int))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "message lacks protocol version 'v'");
	if (json_object_get_int(v) != DG_PROTO_VERSION) {
		dg_error_set(err, DG_E_PROTOCOL, EPROTO,
			     "protocol version %d is not supported (this side speaks %d)",
			     json_object_get_int(v), DG_PROTO_VERSION);
		dg_error_hint(err, "devgatectl and devgated come from different releases; "
				   "install matching versions");
		return -EPROTO;
	}
	return 0;
}

/* One JSON object in this side's protocol version, or NULL with err set. */
static json_object *parse_message(const char *line, struct dg_error *err)
{
	json_object *o = json_parse_object(line);

	if (!o) {
		dg_error_set(err, DG_E_PROTOCOL, EPROTO, "malformed message: not one JSON object");
		return NULL;
	}
	if (check_version(o, err) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static const struct dg_field *find_field(const struct dg_field *fields, const char *name)
{
	for (; fields->name; fields++) {
		if (strcmp(fields->name, name) == 0)
			return fields;
	}
	return NULL;
}

static int check_args(const struct dg_op_info *info, json_object *args, struct dg_error *err)
{
	json_object_object_foreach(args, key, val)
	{
		const struct dg_field *f = find_field(info->fields, key);

		if (!f)
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
					    "operation '%s' has no argument '%s'", info->name, key);
		if (!json_object_is_type(val, f->type))
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
					    "argument '%s' of '%s' must be a %s", key, info->name,
					    json_type_to_name(f->type));
	}
	for (const struct dg_field *f = info->fields; f->name; f++) {
		if (f->required && !json_object_object_get_ex(args, f->name, NULL))
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
					    "operation '%s' needs argument '%s'", info->name,
					    f->name);
	}
	return 0;
}

int dg_request_parse(const char *line, enum dg_op *ret_op, json_object **ret_args,
		     struct dg_error *err)
{
	auto_json json_object *msg = parse_message(line, err);
	json_object *op, *args = NULL;
	enum dg_op code;
	int r;

	if (!msg)
		return -EPROTO;
	json_object_object_foreach(msg, key, val)
	{
		(void)val;
		if (strcmp(key, "v") != 0 && strcmp(key, "op") != 0 && strcmp(key, "args") != 0)
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
					    "request has unknown field '%s'", key);
	}
	if (!json_object_object_get_ex(msg, "op", &op) || !json_object_is_type(op, json_type_string))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "request lacks 'op'");
	if (dg_op_from_name(json_object_get_string(op), &code) < 0)
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "unknown operation '%s'",
				    json_object_get_string(op));
	if (json_object_object_get_ex(msg, "args", &args) &&
	    !json_object_is_type(args, json_type_object))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "'args' must be an object");
	args = args ? json_object_get(args) : json_object_new_object();
	r = check_args(&op_table[code], args, err);
	if (r < 0) {
		json_object_put(args);
		return r;
	}
	*ret_op = code;
	*ret_args = args;
	return 0;
}

static json_object *reply_new(bool ok)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "v", json_object_new_int(DG_PROTO_VERSION));
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	return o;
}

json_object *dg_reply_ok(json_object *result)
{
	json_object *o = reply_new(true);

	json_object_object_add(o, "result", result ? result : json_object_new_object());
	return o;
}

json_object *dg_reply_error(const struct dg_error *err)
{
	json_object *o = reply_new(false);

	json_object_object_add(o, "error", dg_error_to_json(err));
	return o;
}

json_object *dg_event_new(json_object *event)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "v", json_object_new_int(DG_PROTO_VERSION));
	json_object_object_add(o, "event", event);
	return o;
}

int dg_reply_parse(const char *line, json_object **ret_result, struct dg_error *err)
{
	auto_json json_object *msg = parse_message(line, err);
	json_object *ok, *body;

	if (!msg)
		return -EPROTO;
	if (!json_object_object_get_ex(msg, "ok", &ok) || !json_object_is_type(ok, json_type_boolean))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "reply lacks 'ok'");
	if (!json_object_get_boolean(ok)) {
		if (!json_object_object_get_ex(msg, "error", &body) ||
		    !json_object_is_type(body, json_type_object))
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "error reply lacks 'error'");
		dg_error_from_json(body, err);
		return -EREMOTEIO;
	}
	if (!json_object_object_get_ex(msg, "result", &body))
		body = NULL;
	*ret_result = body ? json_object_get(body) : json_object_new_object();
	return 0;
}

int dg_event_parse(const char *line, json_object **ret_event, struct dg_error *err)
{
	auto_json json_object *msg = parse_message(line, err);
	json_object *ev;

	if (!msg)
		return -EPROTO;
	if (!json_object_object_get_ex(msg, "event", &ev))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "stream line lacks 'event'");
	*ret_event = json_object_get(ev);
	return 0;
}

void dg_linebuf_free(struct dg_linebuf *lb)
{
	free(lb->buf);
	*lb = (struct dg_linebuf){ 0 };
}

int dg_linebuf_append(struct dg_linebuf *lb, const char *data, size_t len)
{
	if (lb->len + len > DG_MSG_MAX + 1)
		return -EMSGSIZE;
	if (lb->len + len + 1 > lb->cap) {
		size_t cap = lb->cap ? lb->cap : 4096;
		char *nbuf;

		while (cap < lb->len + len + 1)
			cap *= 2;
		nbuf = realloc(lb->buf, cap);
		if (!nbuf)
			return -ENOMEM;
		lb->buf = nbuf;
		lb->cap = cap;
	}
	memcpy(lb->buf + lb->len, data, len);
	lb->len += len;
	lb->buf[lb->len] = '\0';
	return 0;
}

int dg_linebuf_pop(struct dg_linebuf *lb, char **ret)
{
	char *nl, *line;
	size_t n;

	if (!lb->buf)
		return 0;
	nl = memchr(lb->buf, '\n', lb->len);
	if (!nl)
		return lb->len > DG_MSG_MAX ? -EMSGSIZE : 0;
	n = (size_t)(nl - lb->buf);
	line = strndup(lb->buf, n);
	if (!line)
		return -ENOMEM;
	memmove(lb->buf, nl + 1, lb->len - n - 1);
	lb->len -= n + 1;
	lb->buf[lb->len] = '\0';
	*ret = line;
	return 1;
}

int dg_send(int fd, json_object *msg)
{
	const char *s = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	struct iovec iov[2] = {
		{ .iov_base = (void *)s, .iov_len = strlen(s) },
		{ .iov_base = (void *)"\n", .iov_len = 1 },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	while (mh.msg_iovlen > 0) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Advance past what was sent. */
		while (mh.msg_iovlen > 0 && (size_t)n >= mh.msg_iov[0].iov_len) {
			n -= (ssize_t)mh.msg_iov[0].iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen > 0) {
			mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + n;
			mh.msg_iov[0].iov_len -= (size_t)n;
		}
	}
	return 0;
}

int dg_recv_line(int fd, struct dg_linebuf *lb, char **ret)
{
	for (;;) {
		char buf[8192];
		ssize_t n;
		int r = dg_linebuf_pop(lb, ret);

		if (r != 0)
			return r < 0 ? r : 0;
		n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		r = dg_linebuf_append(lb, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}
