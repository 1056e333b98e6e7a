// SPDX-License-Identifier: Apache-2.0
/*
 * The envelope of every message (see protocol.h): version, ok, error,
 * result or event, one JSON object per line, and reading and writing such
 * lines on a socket. It knows no operation's fields: those are wire.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "protocol.h"

static int check_version(json_object *msg, struct dg_error *err)
{
	json_object *v;

	if (!json_object_object_get_ex(msg, "v", &v) || !json_object_is_type(v, json_type_int))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
				    "message lacks protocol version 'v'");
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

json_object *dg_message_parse(const char *line, struct dg_error *err)
{
	const char *why;
	json_object *o = json_parse_object_why(line, &why);

	if (!o) {
		dg_error_set(err, DG_E_PROTOCOL, EPROTO, "malformed message: %s",
			     why ? why : "not one JSON object");
		return NULL;
	}
	if (check_version(o, err) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
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
	auto_json json_object *msg = dg_message_parse(line, err);
	json_object *ok, *body;

	if (!msg)
		return -EPROTO;
	if (!json_object_object_get_ex(msg, "ok", &ok) ||
	    !json_object_is_type(ok, json_type_boolean))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "reply lacks 'ok'");
	if (!json_object_get_boolean(ok)) {
		if (!json_object_object_get_ex(msg, "error", &body) ||
		    !json_object_is_type(body, json_type_object))
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
					    "error reply lacks 'error'");
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
	auto_json json_object *msg = dg_message_parse(line, err);
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
	size_t max = lb->max;

	free(lb->buf);
	*lb = (struct dg_linebuf){ .max = max };
}

static size_t linebuf_max(const struct dg_linebuf *lb)
{
	return lb->max ? lb->max : DG_MSG_MAX;
}

int dg_linebuf_append(struct dg_linebuf *lb, const char *data, size_t len)
{
	if (lb->len + len > linebuf_max(lb) + 1)
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
		return lb->len > linebuf_max(lb) ? -EMSGSIZE : 0;
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
