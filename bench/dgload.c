// SPDX-License-Identifier: Apache-2.0
/*
 * dgload: drives devgated over its socket and times each request, as a
 * runtime integration would call it (no process start per request).
 *
 *   dgload -s SOCK -g SEL [-n N] [-p MS] [-k] [--shared] [-j JOBS] PID...
 *   dgload -s SOCK -g SEL --hold [--shared] PID...
 *
 * Each job takes one PID and runs N cycles of grant(SEL) then revoke(SEL),
 * checking both succeed. Each request has a connection of its own, as
 * devgatectl makes it; with -k (--keep) each job keeps one connection for
 * all its requests, as a runtime integration or the kubelet plugin would
 * (its connect is not in any request's time). With --hold, every PID is
 * granted once and keeps its lease (to build up load). -p pauses MS
 * milliseconds after each request, as container starts are spaced in life
 * (devgated prepares its spares when idle). Prints one line per request
 * to stdout:
 *   grant <ns>     or     revoke <ns>
 * and on stderr the wall time and request rate of all jobs together (no
 * rate where a request failed).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "client.h"
#include "util.h"

struct opts {
	const char *socket;
	const char *gpus;
	unsigned int cycles;
	unsigned int jobs;
	unsigned int pause_ms;
	bool shared;
	bool hold;
	bool keep;
};

static void request_for(const struct opts *o, enum dg_op op, pid_t pid, struct dg_request *req)
{
	struct dg_target_args t = { .pid = pid, .has_pid = true, .source = "bench" };

	*req = (struct dg_request){ .op = op };
	if (op == DG_OP_GRANT)
		req->u.grant =
			(struct dg_grant_req){ .target = t, .gpus = o->gpus, .shared = o->shared };
	else
		req->u.revoke = (struct dg_revoke_req){ .target = t, .gpus = o->gpus };
}

/*
 * One timed request: on conn when the job keeps one (-k), otherwise on a
 * fresh connection, as devgatectl makes it.
 */
static int timed(const struct opts *o, struct client_conn *conn, enum dg_op op, pid_t pid,
		 uint64_t *ns)
{
	struct dg_request req;
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	struct dg_error err = { 0 };
	uint64_t t0;
	int r;

	request_for(o, op, pid, &req);
	t0 = now_mono_ns();
	r = conn ? client_call(conn, &req, &reply, &arena, &err)
		 : client_request(o->socket, 0, &req, &reply, &arena, &err);
	*ns = now_mono_ns() - t0;
	dg_arena_free(&arena);
	if (r < 0)
		fprintf(stderr, "dgload: %s for PID %d: %s\n", dg_op_info(op)->name, (int)pid,
			err.message);
	return r;
}

/* The one connection a job keeps with -k. */
static int keep_connect(const struct opts *o, struct client_conn *c)
{
	struct dg_error err = { 0 };
	int r = client_connect(o->socket, 0, c, &err);

	if (r < 0)
		fprintf(stderr, "dgload: connecting to %s: %s\n", o->socket, err.message);
	return r;
}

static int job(const struct opts *o, pid_t pid)
{
	/* Buffer our lines so parallel jobs do not interleave within one. */
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct client_conn kept = { .fd = -1 }, *conn = o->keep ? &kept : NULL;
	int r = conn ? keep_connect(o, conn) : 0;

	if (!out) {
		client_close(&kept);
		return 1;
	}
	for (unsigned int i = 0; i < o->cycles && r == 0; i++) {
		uint64_t g = 0, v = 0;

		r = timed(o, conn, DG_OP_GRANT, pid, &g);
		if (o->pause_ms)
			usleep(o->pause_ms * 1000);
		if (r == 0)
			r = timed(o, conn, DG_OP_REVOKE, pid, &v);
		if (o->pause_ms)
			usleep(o->pause_ms * 1000);
		if (r == 0)
			fprintf(out, "grant %llu\nrevoke %llu\n", (unsigned long long)g,
				(unsigned long long)v);
	}
	client_close(&kept);
	fclose(out);
	fwrite(buf, 1, len, stdout);
	fflush(stdout);
	free(buf);
	return r == 0 ? 0 : 1;
}

static int hold_all(const struct opts *o, char **pids, int n)
{
	struct client_conn kept = { .fd = -1 };
	int r = o->keep ? keep_connect(o, &kept) : 0;

	for (int i = 0; i < n && r == 0; i++) {
		uint64_t ns;

		r = timed(o, o->keep ? &kept : NULL, DG_OP_GRANT, (pid_t)atoi(pids[i]), &ns);
		if (r == 0)
			printf("grant %llu\n", (unsigned long long)ns);
	}
	client_close(&kept);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "shared", no_argument, NULL, 'S' },
		{ "hold", no_argument, NULL, 'H' },
		{ "keep", no_argument, NULL, 'k' },
		{ 0 },
	};
	struct opts o = { .socket = DG_DEFAULT_SOCKET, .gpus = "0", .cycles = 200, .jobs = 1 };
	uint64_t t0;
	int c, failed = 0, npids;

	while ((c = getopt_long(argc, argv, "s:g:n:j:p:k", lopts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'g':
			o.gpus = optarg;
			break;
		case 'n':
			o.cycles = (unsigned int)atoi(optarg);
			break;
		case 'j':
			o.jobs = (unsigned int)atoi(optarg);
			break;
		case 'p':
			o.pause_ms = (unsigned int)atoi(optarg);
			break;
		case 'S':
			o.shared = true;
			break;
		case 'H':
			o.hold = true;
			break;
		case 'k':
			o.keep = true;
			break;
		default:
			fprintf(stderr,
				"usage: dgload -s SOCK -g SEL [-n N] [-p MS] [-k] [-j JOBS] "
				"[--shared] PID...\n");
			return 2;
		}
	}
	npids = argc - optind;
	if (o.hold)
		return hold_all(&o, argv + optind, npids);
	if (npids < (int)o.jobs || o.jobs == 0) {
		fprintf(stderr, "dgload: give at least one PID per job\n");
		return 2;
	}
	t0 = now_mono_ns();
	for (unsigned int j = 0; j < o.jobs; j++) {
		pid_t child = fork();

		if (child == 0)
			_exit(job(&o, (pid_t)atoi(argv[optind + j])));
		if (child < 0)
			return 1;
	}
	for (unsigned int j = 0; j < o.jobs; j++) {
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	{
		double s = (double)(now_mono_ns() - t0) / 1e9;

		/* A rate counts every cycle: none where one failed. */
		if (failed)
			fprintf(stderr, "dgload: %u jobs, a request failed after %.3f s\n", o.jobs,
				s);
		else
			fprintf(stderr,
				"dgload: %u jobs, %u cycles each, %s, %.3f s, %.1f requests/s\n",
				o.jobs, o.cycles,
				o.keep ? "one kept connection a job" : "a connection a request", s,
				2.0 * o.jobs * o.cycles / s);
	}
	return failed;
}
