// SPDX-License-Identifier: Apache-2.0
/*
 * What every command that talks to devgated shares: one call, a stream,
 * common options; and, for a grant that waits, finding out after a broken
 * connection whether devgated made the grant before it stopped. It talks
 * to devgated only through client.c and reads nothing but /proc/PID/cgroup.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "util.h"

const char cmd_common_help[] = "  -j, --json             print JSON instead of text\n"
			       "  -h, --help             show this help\n";

void cmd_print_reply(enum dg_op op, const union dg_reply *reply)
{
	auto_json json_object *o = dg_encode(dg_op_info(op)->reply, reply);

	print_json(o);
}

int cmd_call(struct cli *cli, const struct dg_request *req,
	     void (*render)(const struct cli *cli, const union dg_reply *reply))
{
	return cmd_call_wait(cli, req, render, NULL);
}

/* What the target of a waiting grant held when it was sent: devgated's status, and its lease. */
struct before {
	struct dg_arena arena;
	union dg_reply status;
	const struct dg_lease_info *lease; /* NULL: none yet */
	bool known;			   /* status was read */
	char cgroup[512]; /* the target's, from /proc/PID/cgroup; "" if not known */
};

/* Reads the cgroup v2 path of pid ("0::/PATH") into buf; false when it cannot. */
static bool pid_cgroup(int64_t pid, char *buf, size_t len)
{
	auto_free char *text = NULL;
	char path[64];
	const char *line;

	snprintf(path, sizeof(path), "/proc/%lld/cgroup", (long long)pid);
	if (pid <= 0 || read_file_at(AT_FDCWD, path, 65536, &text, NULL) < 0)
		return false;
	line = strncmp(text, "0::", 3) == 0 ? text : strstr(text, "\n0::");
	if (!line)
		return false;
	line += line[0] == '\n' ? 4 : 3;
	snprintf(buf, len, "%.*s", (int)strcspn(line, "\n"), line);
	return buf[0] == '/';
}

/*
 * The lease of status s that is the target's: the cgroup id found before
 * (cgid, 0 if none), else the target's cgroup (by path, from its PID or as
 * given) or its label.
 */
static const struct dg_lease_info *find_lease(const struct dg_status_reply *s,
					      const struct dg_target_args *t, const char *cgroup,
					      uint64_t cgid)
{
	for (size_t i = 0; i < s->n_leases; i++) {
		const struct dg_lease_info *l = &s->leases[i];

		if (cgid ? l->cgroup_id == cgid
			 : (cgroup[0] && l->cgroup && strcmp(l->cgroup, cgroup) == 0) ||
				    (t->cgroup && l->cgroup && strcmp(l->cgroup, t->cgroup) == 0) ||
				    (t->has_pid && l->pid == t->pid))
			return l;
	}
	return NULL;
}

static int ask_status(struct cli *cli, unsigned int timeout_s, union dg_reply *reply,
		      struct dg_arena *a, struct dg_error *err)
{
	struct dg_request req = { .op = DG_OP_STATUS };

	return client_request(cli->socket, timeout_s, &req, reply, a, err);
}

/* Notes what the grant's target holds before it is sent; nothing is lost when that fails. */
static void note_before(struct cli *cli, const struct dg_grant_req *g, struct before *b)
{
	struct dg_error err = { 0 };

	if (!g->target.has_pid || !pid_cgroup(g->target.pid, b->cgroup, sizeof(b->cgroup)))
		b->cgroup[0] = '\0';
	b->known = ask_status(cli, cli->timeout_s, &b->status, &b->arena, &err) == 0;
	if (b->known)
		b->lease = find_lease(&b->status.status, &g->target, b->cgroup, 0);
}

static bool held_gpu(const struct dg_lease_info *l, const struct dg_lease_gpu *g)
{
	for (size_t i = 0; l && i < l->n_gpus; i++) {
		const struct dg_lease_gpu *o = &l->gpus[i];

		if (o->gpu.uuid && g->gpu.uuid && strcmp(o->gpu.uuid, g->gpu.uuid) == 0 &&
		    o->has_gi == g->has_gi && (!g->has_gi || o->gi == g->gi))
			return true;
	}
	return false;
}

static bool held_device(const struct dg_lease_info *l, const struct dg_lease_device *d)
{
	for (size_t i = 0; l && i < l->n_devices; i++) {
		if (l->devices[i].path && d->path && strcmp(l->devices[i].path, d->path) == 0)
			return true;
	}
	return false;
}

/*
 * The grant reply devgated could not send: what now holds what it did not
 * before. Returns whether there is any; its arrays go in a.
 */
static bool rebuild_reply(const struct dg_lease_info *was, const struct dg_lease_info *now,
			  struct dg_grant_reply *ret, struct dg_arena *a)
{
	static const char *warning = "devgated stopped after it made this grant, before it "
				     "answered; this reply is rebuilt from its status";

	*ret = (struct dg_grant_reply){ .lease = *now };
	ret->granted = dg_arena_alloc(a, (now->n_gpus + 1) * sizeof(*ret->granted));
	ret->granted_devices =
		dg_arena_alloc(a, (now->n_devices + 1) * sizeof(*ret->granted_devices));
	ret->warnings = dg_arena_alloc(a, sizeof(*ret->warnings));
	if (!ret->granted || !ret->granted_devices || !ret->warnings)
		return false;
	for (size_t i = 0; i < now->n_gpus; i++) {
		if (!held_gpu(was, &now->gpus[i]))
			ret->granted[ret->n_granted++] = now->gpus[i].gpu.uuid;
	}
	for (size_t i = 0; i < now->n_devices; i++) {
		if (!held_device(was, &now->devices[i]))
			ret->granted_devices[ret->n_granted_devices++] = now->devices[i].path;
	}
	ret->warnings[ret->n_warnings++] = warning;
	return ret->n_granted || ret->n_granted_devices;
}

/*
 * The connection of a waiting grant broke (devgated stopped or crashed): a
 * grant it committed before that stands, and the caller must hear so
 * rather than "ask again". Asks the devgated that comes back (within the
 * client's timeout) what the target holds now, against what it held
 * before. Returns 0 with *reply filled when the grant was made, else a
 * negative errno with cli->err saying whether it was not served or
 * whether that is not known.
 */
static int recover(struct cli *cli, const struct dg_request *req, const struct before *b,
		   union dg_reply *reply, struct dg_arena *a)
{
	const struct dg_target_args *t = &req->u.grant.target;
	unsigned int limit_s = cli->timeout_s ? cli->timeout_s : CLIENT_TIMEOUT_S;
	uint64_t end = now_mono_ns() + (uint64_t)limit_s * 1000000000ull;
	const struct timespec pause = { .tv_nsec = 100 * 1000000L };
	union dg_reply now;
	struct dg_error err = { 0 };
	const struct dg_lease_info *l;
	int r;

	do {
		err = (struct dg_error){ 0 };
		r = ask_status(cli, 1, &now, a, &err);
		if (r == 0)
			break;
		nanosleep(&pause, NULL);
	} while (now_mono_ns() < end);
	if (r < 0) {
		dg_error_set(&cli->err, DG_E_UNREACHABLE, ECONNRESET,
			     "devgated closed the connection while the grant waited and is not "
			     "back within %u s: whether the request was served is not known",
			     limit_s);
		dg_error_hint(&cli->err, "'devgatectl status' shows what the container holds "
					 "once devgated runs; ask again if the grant is not there");
		return -ECONNRESET;
	}
	l = find_lease(&now.status, t, b->cgroup, b->lease ? b->lease->cgroup_id : 0);
	if (l && rebuild_reply(b->lease, l, &reply->grant, a))
		return 0;
	dg_error_set(&cli->err, DG_E_UNREACHABLE, ECONNRESET,
		     "devgated closed the connection while the grant waited; the request was not "
		     "served (devgated is back, and the container holds nothing it did not "
		     "hold before)");
	dg_error_hint(&cli->err, "devgated may have restarted: waiting grants do not survive "
				 "that; ask again");
	return -ECONNRESET;
}

int cmd_call_wait(struct cli *cli, const struct dg_request *req,
		  void (*render)(const struct cli *cli, const union dg_reply *reply),
		  client_wait_fn on_wait)
{
	struct dg_arena arena = { 0 };
	struct before b = { 0 };
	bool waits = req->op == DG_OP_GRANT && req->u.grant.has_wait;
	union dg_reply reply;
	int r;

	if (waits)
		note_before(cli, &req->u.grant, &b);
	r = client_request_wait(cli->socket, cli->timeout_s, req, on_wait, cli, &reply, &arena,
				&cli->err);
	if (r == -ECONNRESET && waits && b.known)
		r = recover(cli, req, &b, &reply, &arena);
	if (r == 0 && cli->json)
		cmd_print_reply(req->op, &reply);
	else if (r == 0)
		render(cli, &reply);
	dg_arena_free(&arena);
	dg_arena_free(&b.arena);
	return r < 0 ? cli_error(cli, &cli->err) : 0;
}

int cmd_no_more_args(struct cli *cli, const char *cmd, int argc, char **argv)
{
	if (optind < argc)
		return cli_usage(cli, cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

int cmd_common_options(struct cli *cli, const char *cmd, const char *help, int argc, char **argv,
		       bool *done)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int o;

	*done = false;
	while ((o = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("%s%s", help, cmd_common_help);
			*done = true;
			return 0;
		} else {
			return cli_usage(cli, cmd, "unknown option");
		}
	}
	return cmd_no_more_args(cli, cmd, argc, argv);
}

static void print_event_json(enum dg_op op, const union dg_stream_event *ev)
{
	auto_json json_object *o = dg_encode(dg_op_info(op)->event, ev);

	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
	fflush(stdout);
}

static int follow(struct cli *cli, struct client_conn *c, enum dg_op op,
		  void (*on_event)(const struct cli *cli, const union dg_stream_event *ev))
{
	for (;;) {
		struct dg_arena arena = { 0 };
		union dg_stream_event ev;
		int r = client_next_event(c, op, &ev, &arena, &cli->err);

		if (r == 0 && cli->json)
			print_event_json(op, &ev);
		else if (r == 0)
			on_event(cli, &ev);
		dg_arena_free(&arena);
		if (r == -ECONNRESET)
			dg_error_set(&cli->err, DG_E_UNREACHABLE, ECONNRESET, "devgated stopped");
		if (r < 0)
			return cli_error(cli, &cli->err);
	}
}

int cmd_stream(struct cli *cli, const struct dg_request *req,
	       void (*on_result)(const struct cli *cli, const union dg_reply *reply),
	       void (*on_event)(const struct cli *cli, const union dg_stream_event *ev))
{
	struct client_conn c = { .fd = -1 };
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	int r;

	r = client_connect(cli->socket, cli->timeout_s, &c, &cli->err);
	if (r == 0)
		r = client_call(&c, req, &reply, &arena, &cli->err);
	if (r == 0 && on_result)
		on_result(cli, &reply);
	dg_arena_free(&arena);
	if (r == 0)
		r = follow(cli, &c, req->op, on_event);
	client_close(&c);
	return r < 0 ? cli_error(cli, &cli->err) : 0;
}
