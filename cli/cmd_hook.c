// SPDX-License-Identifier: Apache-2.0
/*
 * devgatectl hook: the OCI hook. At createRuntime (or prestart) it asks
 * devgated to grant what the container requested, making the nodes under
 * the rootfs from config.json since the container has not pivoted yet; at
 * poststop it releases the lease. A request that cannot be met fails the
 * container's creation: no silent start without the GPU.
 *
 * It runs as root on input shaped by the image (process.env), so before
 * reading anything it clears its environment, drops every capability but
 * those to read the bundle, and confines itself with seccomp.
 */
#include <errno.h>
#include <getopt.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "jsonutil.h"
#include "oci.h"
#include "util.h"

static const char hook_help[] =
	"\n"
	"The OCI hook, run by a container runtime with the container's state JSON on\n"
	"stdin. STAGE is createRuntime, prestart or poststop; without it the state's\n"
	"status decides (creating: grant, stopped: release).\n"
	"\n"
	"What is granted, in order of trust:\n"
	"  1. --gpu SEL or --alias NAME, set by devgate's CDI spec for the devices\n"
	"     the user asked for;\n"
	"  2. the annotations devgate.io/gpus=SEL or devgate.io/gpu-count=N (with\n"
	"     devgate.io/gpu-arch, -model, -product, -min-memory, -min-cc and\n"
	"     devgate.io/shared=true, devgate.io/same-numa=true), or\n"
	"     devgate.io/alias=NAME or\n"
	"     devgate.io/profile=NAME (names devgated's devgate.conf defines);\n"
	"  3. NVIDIA_VISIBLE_DEVICES from the image, only if devgated runs with\n"
	"     --hook-allow-env (an image must not grant itself GPUs).\n"
	"Whichever asks, the annotation devgate.io/ttl=DURATION (90s, 10m, 2h, 1d)\n"
	"makes the lease expire that long after the container starts, as grant --ttl,\n"
	"devgate.io/wait=DURATION makes the hook wait that long for busy GPUs, as\n"
	"grant --wait=DURATION (the runtime's hook timeout must allow it), and\n"
	"devgate.io/driver=KINDS (utility, compute, video, graphics, all) mounts the\n"
	"driver's files with the GPUs, as grant --driver; devgate.io/driver=from-env\n"
	"lets the image's NVIDIA_DRIVER_CAPABILITIES choose the kinds (unset: utility,\n"
	"compute).\n"
	"\n"
	"  -g, --gpu SEL          GPUs of a CDI device (index, UUID, PCI id or 'all')\n"
	"  -a, --alias NAME       the GPU of a CDI device made for an alias in\n"
	"                         devgated's devgate.conf\n";

#if defined(__SANITIZE_ADDRESS__)
/* Sanitizer runtimes ptrace and clone at exit to find leaks: no filter there. */
static int confine_seccomp(void)
{
	return 0;
}
#else
/* Syscalls the hook makes after confining itself (allocation, the bundle, the socket). */
static const int hook_syscalls[] = {
	SCMP_SYS(read),		 SCMP_SYS(write),	 SCMP_SYS(close),      SCMP_SYS(openat),
	SCMP_SYS(newfstatat),	 SCMP_SYS(fstat),	 SCMP_SYS(statx),      SCMP_SYS(lseek),
	SCMP_SYS(mmap),		 SCMP_SYS(munmap),	 SCMP_SYS(mremap),     SCMP_SYS(brk),
	SCMP_SYS(madvise),	 SCMP_SYS(connect),	 SCMP_SYS(sendmsg),    SCMP_SYS(sendto),
	SCMP_SYS(recvfrom),	 SCMP_SYS(recvmsg),	 SCMP_SYS(setsockopt), SCMP_SYS(exit),
	SCMP_SYS(exit_group),	 SCMP_SYS(rt_sigreturn), SCMP_SYS(futex),      SCMP_SYS(getrandom),
	SCMP_SYS(clock_gettime), SCMP_SYS(openat2),
};

static int confine_seccomp(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int r = 0;

	if (!ctx)
		return -ENOMEM;
	for (size_t i = 0; i < ARRAY_SIZE(hook_syscalls) && r == 0; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, hook_syscalls[i], 0);
	if (r == 0) /* unix sockets only: devgated's */
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (r == 0) /* stdio asks whether stdout is a terminal */
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_EQ, TCGETS));
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}
#endif

/* Reading the bundle is all the authority the hook needs. */
static int confine_caps(void)
{
	static const cap_value_t keep[] = { CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH };
	cap_t cur = cap_get_proc(), want = cap_init();
	int r = 0;

	if (!cur || !want) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		cap_flag_value_t v = CAP_CLEAR;

		if (cap_get_flag(cur, keep[i], CAP_PERMITTED, &v) == 0 && v == CAP_SET) {
			cap_set_flag(want, CAP_PERMITTED, 1, &keep[i], CAP_SET);
			cap_set_flag(want, CAP_EFFECTIVE, 1, &keep[i], CAP_SET);
		}
	}
	if (cap_set_proc(want) < 0)
		r = -errno;
out:
	cap_free(cur);
	cap_free(want);
	return r;
}

static int confine(struct dg_error *err)
{
	int r;

	if (clearenv() != 0)
		return dg_error_set(err, DG_E_HOOK, EIO, "cannot clear the environment");
	r = confine_caps();
	if (r == 0)
		r = confine_seccomp();
	if (r < 0)
		return dg_error_set(err, DG_E_HOOK, r, "cannot confine the hook: %s", strerror(-r));
	return 0;
}

static int read_state(struct oci_state *s, struct dg_error *err)
{
	auto_free char *text = NULL;
	int r = read_fd_full(STDIN_FILENO, OCI_STATE_MAX, &text, NULL);

	if (r == -EFBIG)
		return dg_error_set(err, DG_E_HOOK, EFBIG,
				    "invalid OCI state on stdin: larger than "
				    "%zu bytes",
				    OCI_STATE_MAX);
	if (r < 0)
		return dg_error_set(err, DG_E_HOOK, r, "cannot read the OCI state on stdin: %s",
				    strerror(-r));
	return oci_state_parse(text, s, err);
}

static void grant_args(const struct oci_state *s, const struct oci_config *cfg,
		       const struct oci_request *oreq, const char *source, struct dg_request *req)
{
	struct dg_grant_req *g = &req->u.grant;

	*req = (struct dg_request){ .op = DG_OP_GRANT };
	g->target.pid = s->pid;
	g->target.has_pid = true;
	g->target.container = s->id;
	g->target.source = source;
	g->root = cfg->root;
	g->gpus = oreq->gpus;
	g->count = oreq->count;
	g->has_count = oreq->count > 0;
	g->arch = oreq->arch;
	g->model = oreq->model;
	g->product = oreq->product;
	g->min_memory = oreq->min_memory;
	g->min_cc = oreq->min_cc;
	g->alias = oreq->alias;
	g->profile = oreq->profile;
	g->shared = oreq->shared;
	g->same_numa = oreq->same_numa;
	g->from_image = oreq->source == REQ_IMAGE_ENV;
	g->ttl = oreq->ttl;
	g->has_ttl = oreq->ttl > 0;
	g->wait = oreq->wait;
	g->has_wait = oreq->wait > 0;
	g->driver = oreq->driver;
}

/* One request, its reply unused beyond success. */
static int call(struct cli *cli, const struct dg_request *req, union dg_reply *reply,
		struct dg_error *err)
{
	struct dg_arena arena = { 0 };
	int r = client_request(cli->socket, cli->timeout_s, req, reply, &arena, err);

	dg_arena_free(&arena);
	return r;
}

/* Whether devgated lets images ask for GPUs through their environment. */
static int env_allowed(struct cli *cli, bool *ret, struct dg_error *err)
{
	struct dg_request req = { .op = DG_OP_PING };
	union dg_reply reply;
	int r = call(cli, &req, &reply, err);

	if (r < 0)
		return r;
	*ret = reply.ping.hook_allow_env;
	return 0;
}

/* What the hook's arguments name: a CDI device's GPUs or alias. */
struct hook_cdi {
	const char *gpus;
	const char *alias;
};

static int hook_request(const struct hook_cdi *cdi, const struct oci_config *cfg,
			struct oci_request *req, struct dg_error *err)
{
	if (!cdi->alias)
		return oci_request(cdi->gpus, cfg, true, req, err);
	if (oci_request_alias(cdi->alias, req) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

static int hook_create(struct cli *cli, const struct oci_state *s, const struct hook_cdi *cdi,
		       const char *stage, struct dg_error *err)
{
	auto_cleanup(oci_config_done) struct oci_config cfg = { 0 };
	auto_cleanup(oci_request_done) struct oci_request req = { 0 };
	struct dg_request grant;
	union dg_reply reply;
	char source[64];
	bool allowed = false;
	int r;

	if (s->pid <= 0)
		return dg_error_set(err, DG_E_HOOK, EINVAL,
				    "invalid OCI state on stdin: no 'pid' "
				    "at stage %s",
				    stage);
	r = oci_config_load(s->bundle, &cfg, err);
	if (r == 0)
		r = hook_request(cdi, &cfg, &req, err);
	if (r < 0)
		return r;
	if (req.source == REQ_IMAGE_ENV) {
		r = env_allowed(cli, &allowed, err);
		if (r < 0)
			return r;
		if (!allowed) {
			fprintf(stderr,
				"devgatectl hook: ignoring NVIDIA_VISIBLE_DEVICES from the "
				"image of %s: devgated's hook-allow-env is off\n",
				s->id);
			return 0;
		}
	}
	if (req.source == REQ_NONE)
		return 0;
	snprintf(source, sizeof(source), "hook/%s", stage);
	grant_args(s, &cfg, &req, source, &grant);
	/* devgated checks that the state's PID holds this very rootfs. */
	r = oci_root_identity(s->bundle, &cfg, &grant.u.grant.root_id.dev,
			      &grant.u.grant.root_id.ino, err);
	if (r < 0)
		return r;
	grant.u.grant.has_root_id = true;
	return call(cli, &grant, &reply, err);
}

static int hook_release(struct cli *cli, const struct oci_state *s, struct dg_error *err)
{
	struct dg_request req = {
		.op = DG_OP_REVOKE,
		.u.revoke = {
			.target = { .container = s->id, .source = "hook/poststop" },
			.missing_ok = true,
		},
	};
	union dg_reply reply;

	return call(cli, &req, &reply, err);
}

/* Puts the container and stage in front of the message the runtime will show. */
static int hook_fail(struct cli *cli, const struct oci_state *s, const char *stage,
		     struct dg_error *err)
{
	char prefix[320];
	size_t plen, mlen = strlen(err->message);

	if (s->id) {
		snprintf(prefix, sizeof(prefix), "hook %.32s for container %.200s: ", stage, s->id);
		plen = strlen(prefix);
		if (plen + mlen >= sizeof(err->message))
			mlen = sizeof(err->message) - plen - 1;
		memmove(err->message + plen, err->message, mlen);
		memcpy(err->message, prefix, plen);
		err->message[plen + mlen] = '\0';
	}
	return cli_error(cli, err);
}

void cmd_hook_help(FILE *f, const char *synopsis)
{
	fprintf(f, "Usage: %s\n%s  -h, --help             show this help\n", synopsis, hook_help);
}

int cmd_hook(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "gpu", required_argument, NULL, 'g' },
		{ "alias", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	auto_cleanup(oci_state_done) struct oci_state s = { 0 };
	struct dg_error err = { 0 };
	struct hook_cdi cdi = { 0 };
	const char *stage_arg = NULL, *stage;
	enum oci_stage st;
	int o, r;

	while ((o = getopt_long(argc, argv, "g:a:h", opts, NULL)) != -1) {
		if (o == 'g') {
			cdi.gpus = optarg;
		} else if (o == 'a') {
			cdi.alias = optarg;
		} else if (o == 'h') {
			cmd_hook_help(stdout, "devgatectl hook [STAGE] [--gpu SEL | --alias NAME]");
			return 0;
		} else {
			return cli_usage(cli, "hook", "unknown option");
		}
	}
	if (optind < argc)
		stage_arg = argv[optind++];
	if (optind < argc)
		return cli_usage(cli, "hook", "unexpected argument '%s'", argv[optind]);
	if (cdi.gpus && cdi.alias)
		return cli_usage(cli, "hook", "give --gpu or --alias, not both");
	r = confine(&err);
	if (r == 0)
		r = read_state(&s, &err);
	if (r == 0)
		r = oci_stage(stage_arg, s.status, &st, &err);
	stage = stage_arg ? stage_arg
			  : (r == 0 && st == STAGE_POSTSTOP ? "poststop" : "createRuntime");
	if (r == 0)
		r = st == STAGE_POSTSTOP ? hook_release(cli, &s, &err)
					 : hook_create(cli, &s, &cdi, stage, &err);
	return r < 0 ? hook_fail(cli, &s, stage, &err) : 0;
}
