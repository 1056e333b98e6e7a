// SPDX-License-Identifier: Apache-2.0
/* list, grant, revoke, status, watch, rescan: the admin's commands. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "gpu.h"
#include "gpu_arch.h"
#include "util.h"

/* ---- list ---- */

static const char list_help[] =
	"Usage: devgatectl list [--free] [--json]\n"
	"\n"
	"Lists the host's GPUs and control nodes: index, device minor, UUID, PCI bus id,\n"
	"vendor:product id, architecture, compute capability, memory, NUMA node, state\n"
	"(free, held, shared, split, unusable, excluded) and model. '-' where the driver or\n"
	"sysfs does not say. A GPU in MIG mode has its instances on rows under it:\n"
	"GPU:GI (what grant --gpu takes), the minor of /dev/nvidia-caps/nvidia-cap<N>,\n"
	"state and holder, compute instances; 'split' is a GPU whose instances are held.\n"
	"\n"
	"  -f, --free             only GPUs nobody holds\n";

static void holders_text(const struct dg_list_gpu *g, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < g->n_holders && off < len; i++) {
		const struct dg_holder_info *h = &g->holders[i];

		/* A runtime's name says whose: docker:web; a label stands alone. */
		off += (size_t)snprintf(buf + off, len - off, "%s%s%s%s", i ? "," : "",
					h->runtime ? h->runtime : "", h->runtime ? ":" : "",
					h->container ? h->container : h->cgroup);
	}
}

/* "80G" (GiB when whole), "-" when not known. */
static void memory_text(const struct dg_gpu_info *g, char *buf, size_t len)
{
	if (!g->has_memory_mib)
		snprintf(buf, len, "-");
	else if (g->memory_mib % 1024 == 0)
		snprintf(buf, len, "%lldG", (long long)(g->memory_mib / 1024));
	else
		snprintf(buf, len, "%lldM", (long long)g->memory_mib);
}

static void list_row(struct table *t, const struct dg_list_gpu *g)
{
	char idx[24], minor[24], state[256], who[200], mem[32], numa[24] = "-";
	const char *cells[12];

	snprintf(idx, sizeof(idx), "%lld", (long long)g->gpu.index);
	snprintf(minor, sizeof(minor), "%lld", (long long)g->gpu.minor);
	holders_text(g, who, sizeof(who));
	snprintf(state, sizeof(state), "%s%s%s", g->state, who[0] ? " by " : "", who);
	memory_text(&g->gpu, mem, sizeof(mem));
	if (g->gpu.has_numa_node)
		snprintf(numa, sizeof(numa), "%lld", (long long)g->gpu.numa_node);
	cells[0] = idx;
	cells[1] = g->gpu.vendor ? g->gpu.vendor : "nvidia";
	cells[2] = minor;
	cells[3] = g->gpu.uuid;
	cells[4] = g->gpu.pci;
	cells[5] = g->gpu.product;
	cells[6] = g->gpu.arch;
	cells[7] = g->gpu.cc ? g->gpu.cc : "-";
	cells[8] = mem;
	cells[9] = numa;
	cells[10] = state;
	cells[11] = g->gpu.model;
	table_add(t, cells);
}

/*
 * A MIG instance, on a row under its GPU: "0:1", its capability minor, its
 * compute instances' and its profile (NVML's; devgate reads the driver's /proc).
 */
static void instance_row(struct table *t, const struct dg_list_gpu *g,
			 const struct dg_instance_info *in)
{
	char idx[48], minor[24], state[256], what[256];
	const char *cells[12];
	size_t off;

	snprintf(idx, sizeof(idx), "%lld:%lld", (long long)g->gpu.index, (long long)in->gi);
	snprintf(minor, sizeof(minor), "cap%lld", (long long)in->minor);
	snprintf(state, sizeof(state), "%s%s%s", in->state, in->has_holder ? " by " : "",
		 in->has_holder ? (in->holder.container ? in->holder.container : in->holder.cgroup)
				: "");
	off = (size_t)snprintf(what, sizeof(what), "MIG instance, profile %s, compute instances",
			       in->profile ? in->profile : "unknown");
	for (size_t c = 0; c < in->n_cis && off < sizeof(what); c++)
		off += (size_t)snprintf(what + off, sizeof(what) - off, "%s %lld (cap%lld)",
					c ? "," : "", (long long)in->cis[c].ci,
					(long long)in->cis[c].minor);
	for (size_t i = 0; i < 12; i++)
		cells[i] = "-";
	cells[0] = idx;
	cells[1] = "mig";
	cells[2] = minor;
	if (in->uuid)
		cells[3] = in->uuid;
	cells[10] = state;
	cells[11] = what;
	table_add(t, cells);
}

static void render_list(const struct cli *cli, const union dg_reply *reply)
{
	static const char *const head[] = { "IDX",  "VENDOR", "MINOR", "UUID", "PCI",	"PRODUCT",
					    "ARCH", "CC",     "MEM",   "NUMA", "STATE", "MODEL" };
	const struct dg_list_reply *r = &reply->list;
	struct table *t = table_new(ARRAY_SIZE(head), head);

	(void)cli;
	for (size_t i = 0; i < r->n_gpus; i++) {
		list_row(t, &r->gpus[i]);
		for (size_t j = 0; j < r->gpus[i].n_instances; j++)
			instance_row(t, &r->gpus[i], &r->gpus[i].instances[j]);
	}
	if (r->n_gpus)
		table_print(t, stdout);
	else
		printf("no GPU%s found under %s\n", r->free_only ? " free" : "", r->host_root);
	table_free(t);
	for (size_t i = 0; i < r->n_gpus; i++) {
		if (r->gpus[i].gpu.problem)
			printf("GPU %lld: %s\n", (long long)r->gpus[i].gpu.index,
			       r->gpus[i].gpu.problem);
		else if (strcmp(r->gpus[i].state, "excluded") == 0)
			printf("GPU %lld: not in devgated's gpu-allow list; never granted%s\n",
			       (long long)r->gpus[i].gpu.index,
			       r->gpus[i].n_holders ? " again (held until revoked)" : "");
	}
	printf("control nodes:");
	for (size_t i = 0; i < r->n_control_nodes; i++) {
		const struct dg_node_info *c = &r->control_nodes[i];

		printf(" %s (%lld:%lld)", c->path, (long long)c->major, (long long)c->minor);
	}
	printf("%s\n",
	       r->n_control_nodes ? "" : " none (no NVIDIA or kfd driver in /proc/devices)");
	if (r->control_problem)
		printf("control nodes unusable: %s\n", r->control_problem);
	if (r->nvml_problem)
		printf("MIG profiles and UUIDs unknown: %s\n", r->nvml_problem);
}

int list_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done)
{
	static const struct option opts[] = {
		{ "free", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int o;

	*req = (struct dg_request){ .op = DG_OP_LIST };
	*done = false;
	while ((o = getopt_long(argc, argv, "fjh", opts, NULL)) != -1) {
		switch (o) {
		case 'f':
			req->u.list.free = true;
			break;
		case 'j':
			cli->json = true;
			break;
		case 'h':
			printf("%s%s", list_help, cmd_common_help);
			*done = true;
			return 0;
		default:
			return cli_usage(cli, "list", "unknown option");
		}
	}
	return cmd_no_more_args(cli, "list", argc, argv);
}

int cmd_list(struct cli *cli, int argc, char **argv)
{
	struct dg_request req;
	bool done;
	int r = list_parse(cli, argc, argv, &req, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_list);
}

/* ---- grant / revoke ---- */

static const char grant_help[] =
	"Usage: devgatectl grant TARGET REQUEST [OPTIONS]\n"
	"\n"
	"Gives a running container GPUs: creates /dev/nvidia* nodes inside it and allows\n"
	"them in its cgroup's device programs. Exclusive unless --shared. All or nothing.\n"
	"\n"
	"TARGET (one of):\n"
	"  -p, --pid PID          a process of the container (host PID)\n"
	"  -c, --cgroup PATH      the container's cgroup, relative to the cgroup v2 root\n"
	"  -n, --container NAME   its name or ID in Docker, podman, LXD or runc, looked\n"
	"                         up by devgated in the runtimes' own state\n"
	"      --runtime RT       with --container: only in RT (docker, podman, lxd, runc)\n"
	"REQUEST (GPUs by --gpu, --gpus, --alias or --profile; --device with any, or\n"
	"alone):\n"
	"  -g, --gpu SEL[,SEL..]  index, UUID or unique UUID prefix, PCI bus id, or 'all';\n"
	"                         or MIG instances GPU:GI (e.g. 0:1, as 'list' shows them)\n"
	"                         or MIG-<uuid>\n"
	"  -N, --gpus N           N GPUs in total, on one NUMA node where it can (the\n"
	"                         node of the container's CPUs first), optionally\n"
	"      --model STR        ... whose model contains STR\n"
	"      --arch NAME        ... of this architecture, any case (fermi, kepler,\n"
	"                         maxwell, pascal, volta, turing, ampere, ada, hopper,\n"
	"                         blackwell); NVIDIA GPUs only\n"
	"      --vendor NAME      ... of this vendor: nvidia, amd or intel\n"
	"      --product V:D      ... with this PCI vendor:device id (e.g. 10de:2330)\n"
	"      --alias NAME       ... with the vendor:device id devgate.conf names NAME\n"
	"      --min-memory SIZE  ... with at least SIZE memory (40G, 16GiB, 512M)\n"
	"      --min-cc X.Y       ... with at least this compute capability (8.0)\n"
	"      --same-numa        ... all on one NUMA node, or refuse\n"
	"      --profile NAME     the request devgate.conf names NAME (\"profile NAME =\n"
	"                         gpus=2 arch=ampere\"); options given here override it.\n"
	"                         Else a MIG profile (1g.18gb): free instances of it\n"
	"  -d, --device HOST[:PATH]  a host character device (root only; repeatable):\n"
	"                         node PATH (default HOST, /dev/NAME) in the container.\n"
	"                         Beyond /dev/null, zero, full, random, urandom, tty,\n"
	"                         ptmx, net/tun and fuse, and for block devices, only\n"
	"                         where devgate.conf's device-allow names them\n"
	"      --access ACC       what the --device nodes allow: r, w, m (mknod) or a\n"
	"                         mix (default rw)\n"
	"      --driver CAPS      also mount the host driver's files of these kinds\n"
	"                         (utility, compute, video, graphics, all), read-only,\n"
	"                         at the host's paths; they go with the last GPU\n"
	"OPTIONS:\n"
	"  -n, --container LABEL  with --pid or --cgroup: a name to show for it\n"
	"  -S, --shared           share the GPUs (time slicing) instead of holding them\n"
	"      --card             AMD and Intel GPUs: their /dev/dri/cardN (display) too\n"
	"      --root PATH        rootfs inside the container's mount namespace, for\n"
	"                         containers that have not pivoted yet (OCI hooks)\n"
	"      --ttl DURATION     revoke the whole lease this long from now (90s, 10m,\n"
	"                         2h, 1d; at most 366d); replaces the lease's expiry.\n"
	"                         Without it an expiry the lease has stays\n"
	"      --kill-on-expiry   with --ttl: at expiry, kill processes that still\n"
	"                         hold the lease's nodes open (as revoke --kill)\n"
	"      --wait[=TIMEOUT]   when the GPUs are busy, wait in devgated's queue until\n"
	"                         they free (at most TIMEOUT: 30s, 10m; none: no limit);\n"
	"                         the place is shown on stderr. Ctrl-C leaves the queue\n"
	"      --priority N       in the queue, higher N is served first (-1000 to 1000,\n"
	"                         default 0); first come, first served within one\n";

static const char revoke_help[] =
	"Usage: devgatectl revoke TARGET [--gpu SEL[,SEL..]] [--device PATH].. [--missing-ok]\n"
	"                         [--kill[=SIGNAL]]\n"
	"\n"
	"Takes GPUs and devices back: the grant is removed from the container's device\n"
	"programs first (its next open() fails with EPERM), then the nodes are removed.\n"
	"Without --gpu and --device, everything the container holds. When it holds\n"
	"nothing, the runtime's device programs are put back exactly as they were.\n"
	"\n"
	"TARGET (one of):\n"
	"  -p, --pid PID          a process of the container (host PID)\n"
	"  -c, --cgroup PATH      the container's cgroup, relative to the cgroup v2 root\n"
	"  -n, --container NAME   the label given at grant time, else a name or ID in\n"
	"                         Docker, podman, LXD or runc (--runtime RT: only there)\n"
	"  -g, --gpu SEL[,SEL..]  only these GPUs (or MIG instances, GPU:GI or MIG-<uuid>)\n"
	"  -d, --device PATH      only this device, by container or host path (repeatable)\n"
	"      --missing-ok       succeed when the container holds no GPU\n"
	"      --kill[=SIGNAL]    end processes that still hold a revoked device open\n"
	"                         (opened before the revoke); KILL unless SIGNAL is given\n";

enum {
	OPT_MODEL = 256,
	OPT_ARCH,
	OPT_VENDOR,
	OPT_CARD,
	OPT_PRODUCT,
	OPT_ALIAS,
	OPT_PROFILE,
	OPT_MIN_MEMORY,
	OPT_MIN_CC,
	OPT_ROOT,
	OPT_MISSING_OK,
	OPT_KILL,
	OPT_KILL_ON_EXPIRY,
	OPT_ACCESS,
	OPT_DRIVER,
	OPT_SAME_NUMA,
	OPT_TTL, /* no short option: -t before the command is --timeout */
	OPT_WAIT,
	OPT_PRIORITY,
	OPT_RUNTIME,
};

/* --ttl, --by: a usage error that says what a duration looks like. */
static int parse_duration_opt(struct cli *cli, const char *cmd, const char *opt, const char *s,
			      int64_t *ret)
{
	struct dg_error err = { 0 };
	int r = parse_duration(s, ret);

	if (r == 0)
		return 0;
	dg_error_set(&err, DG_E_INVALID, EINVAL, "%s: %s wants a duration, not '%s'%s", cmd, opt, s,
		     r == -ERANGE ? " (from 1 second to 366 days)" : "");
	dg_error_hint(&err, "a duration is a whole number with an optional unit s, m, h or d: "
			    "90s, 10m, 2h, 1d");
	return cli_error(cli, &err);
}

static int parse_target_pid(struct cli *cli, const char *cmd, struct dg_target_args *t,
			    const char *s)
{
	pid_t pid;

	if (parse_pid(s, &pid) < 0)
		return cli_usage(cli, cmd, "'%s' is not a PID", s);
	t->pid = pid;
	t->has_pid = true;
	return 0;
}

static int parse_count(struct cli *cli, struct dg_grant_req *g, const char *s)
{
	uint32_t n;

	if (parse_u32(s, &n) < 0 || n == 0 || n > DG_MAX_GPUS)
		return cli_usage(cli, "grant", "--gpus wants a count from 1 to %d, not '%s'",
				 DG_MAX_GPUS, s);
	g->count = n;
	g->has_count = true;
	return 0;
}

/*
 * Options grant and revoke share. *handled says whether o was one of them;
 * the return value says whether it was right.
 */
static int target_opt(struct cli *cli, const char *cmd, int o, struct dg_target_args *t,
		      const char **gpus, bool *handled)
{
	*handled = true;
	switch (o) {
	case 'p':
		return parse_target_pid(cli, cmd, t, optarg);
	case 'c':
		t->cgroup = optarg;
		return 0;
	case 'n':
		t->container = optarg;
		return 0;
	case OPT_RUNTIME:
		t->runtime = optarg;
		return 0;
	case 'g':
		*gpus = optarg;
		return 0;
	case 'j':
		cli->json = true;
		return 0;
	default:
		*handled = false;
		return 0;
	}
}

/* --device, repeatable: the strings go as they are; devgated parses and checks them. */
static int add_device(struct cli *cli, const char *cmd, struct dg_arena *a, const char *spec,
		      const char ***devices, size_t *n)
{
	if (!*spec)
		return cli_usage(cli, cmd, "--device wants a path");
	if (*n == DG_MAX_DEVICES)
		return cli_usage(cli, cmd, "at most %d --device options", DG_MAX_DEVICES);
	if (!*devices) {
		*devices = dg_arena_alloc(a, DG_MAX_DEVICES * sizeof(**devices));
		if (!*devices)
			return cli_usage(cli, cmd, "out of memory");
	}
	(*devices)[(*n)++] = spec;
	return 0;
}

static int parse_priority(struct cli *cli, struct dg_grant_req *g, const char *s)
{
	bool neg = s[0] == '-';
	uint32_t n;

	if (parse_u32(s + neg, &n) < 0 || n > (neg ? -DG_PRIORITY_MIN : DG_PRIORITY_MAX))
		return cli_usage(cli, "grant", "--priority wants a number from %d to %d, not '%s'",
				 DG_PRIORITY_MIN, DG_PRIORITY_MAX, s);
	g->priority = neg ? -(int64_t)n : (int64_t)n;
	g->has_priority = true;
	return 0;
}

/* Checked here too, so a typo is a usage error and nothing is sent. */
static int kind_opt(struct cli *cli, int o, struct dg_grant_req *g, const char *s)
{
	uint64_t mib;
	unsigned int cc;

	if (o == OPT_MIN_MEMORY) {
		if (gpu_size_parse(s, &mib) < 0)
			return cli_usage(cli, "grant",
					 "--min-memory wants a size with a unit (40G, 16GiB, "
					 "512M), not '%s'",
					 s);
		g->min_memory = s;
		return 0;
	}
	if (gpu_cc_parse(s, &cc) < 0)
		return cli_usage(cli, "grant",
				 "--min-cc wants a compute capability MAJOR.MINOR (8.0), not '%s'",
				 s);
	g->min_cc = s;
	return 0;
}

static int grant_opt(struct cli *cli, int o, struct dg_request *req, bool *done)
{
	struct dg_grant_req *g = &req->u.grant;

	switch (o) {
	case 'd':
		return add_device(cli, "grant", &req->arena, optarg, &g->devices, &g->n_devices);
	case 'N':
		return parse_count(cli, g, optarg);
	case OPT_MODEL:
		g->model = optarg;
		return 0;
	case OPT_ARCH:
		g->arch = optarg;
		return 0;
	case OPT_VENDOR:
		g->vendor = optarg;
		return 0;
	case OPT_CARD:
		g->card = true;
		return 0;
	case OPT_PRODUCT:
		g->product = optarg;
		return 0;
	case OPT_ALIAS:
		g->alias = optarg;
		return 0;
	case OPT_PROFILE:
		g->profile = optarg;
		return 0;
	case OPT_MIN_MEMORY:
	case OPT_MIN_CC:
		return kind_opt(cli, o, g, optarg);
	case OPT_ROOT:
		g->root = optarg;
		return 0;
	case 'S':
		g->shared = true;
		return 0;
	case OPT_TTL:
		g->has_ttl = true;
		return parse_duration_opt(cli, "grant", "--ttl", optarg, &g->ttl);
	case OPT_KILL_ON_EXPIRY:
		g->kill_on_expiry = true;
		return 0;
	case OPT_ACCESS:
		g->access = optarg;
		return 0;
	case OPT_DRIVER:
		g->driver = optarg;
		return 0;
	case OPT_SAME_NUMA:
		g->same_numa = true;
		return 0;
	case OPT_WAIT:
		g->has_wait = true;
		return optarg ? parse_duration_opt(cli, "grant", "--wait", optarg, &g->wait) : 0;
	case OPT_PRIORITY:
		return parse_priority(cli, g, optarg);
	case 'h':
		printf("%s%s", grant_help, cmd_common_help);
		*done = true;
		return 0;
	case 's':
		return cli_usage(cli, "grant",
				 "-s is --socket and goes before the command; "
				 "share GPUs with -S (--shared)");
	default:
		return cli_usage(cli, "grant", "unknown option");
	}
}

int grant_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "container", required_argument, NULL, 'n' },
		{ "runtime", required_argument, NULL, OPT_RUNTIME },
		{ "gpu", required_argument, NULL, 'g' },
		{ "gpus", required_argument, NULL, 'N' },
		{ "device", required_argument, NULL, 'd' },
		{ "model", required_argument, NULL, OPT_MODEL },
		{ "arch", required_argument, NULL, OPT_ARCH },
		{ "vendor", required_argument, NULL, OPT_VENDOR },
		{ "card", no_argument, NULL, OPT_CARD },
		{ "product", required_argument, NULL, OPT_PRODUCT },
		{ "alias", required_argument, NULL, OPT_ALIAS },
		{ "profile", required_argument, NULL, OPT_PROFILE },
		{ "min-memory", required_argument, NULL, OPT_MIN_MEMORY },
		{ "min-cc", required_argument, NULL, OPT_MIN_CC },
		{ "shared", no_argument, NULL, 'S' },
		{ "root", required_argument, NULL, OPT_ROOT },
		{ "ttl", required_argument, NULL, OPT_TTL },
		{ "kill-on-expiry", no_argument, NULL, OPT_KILL_ON_EXPIRY },
		{ "access", required_argument, NULL, OPT_ACCESS },
		{ "driver", required_argument, NULL, OPT_DRIVER },
		{ "same-numa", no_argument, NULL, OPT_SAME_NUMA },
		{ "wait", optional_argument, NULL, OPT_WAIT },
		{ "priority", required_argument, NULL, OPT_PRIORITY },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dg_grant_req *g = &req->u.grant;
	int o, r = 0;

	*req = (struct dg_request){ .op = DG_OP_GRANT };
	g->target.source = "cli";
	*done = false;
	while (r == 0 && !*done &&
	       (o = getopt_long(argc, argv, "p:c:n:g:N:d:sSjh", opts, NULL)) != -1) {
		bool handled;

		r = target_opt(cli, "grant", o, &g->target, &g->gpus, &handled);
		if (!handled)
			r = grant_opt(cli, o, req, done);
	}
	if (r < 0 || *done)
		return r;
	r = cmd_no_more_args(cli, "grant", argc, argv);
	if (r == 0 && !g->target.has_pid && !g->target.cgroup && !g->target.container)
		r = cli_usage(cli, "grant",
			      "name the container with --pid, --cgroup or --container");
	if (r == 0 && !g->gpus && !g->has_count && !g->n_devices && !g->profile && !g->alias)
		r = cli_usage(cli, "grant",
			      "ask for GPUs with --gpu SEL, --gpus N, --alias NAME or --profile "
			      "NAME, or for a device with "
			      "--device HOST[:PATH]");
	if (r == 0 && g->kill_on_expiry && !g->has_ttl)
		r = cli_usage(cli, "grant", "--kill-on-expiry needs --ttl DURATION");
	if (r == 0 && g->access && !g->n_devices)
		r = cli_usage(cli, "grant",
			      "--access sets the access of --device nodes; GPUs are read and "
			      "write");
	if (r == 0 && g->has_priority && !g->has_wait)
		r = cli_usage(cli, "grant", "--priority is a place in the queue: it needs --wait");
	return r;
}

static void describe_gpus(const struct dg_lease_info *l, const char *const *only, size_t n_only,
			  char *buf, size_t len)
{
	size_t off = 0, shown = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < l->n_gpus && off < len; i++) {
		const struct dg_gpu_info *g = &l->gpus[i].gpu;
		bool listed = !only;

		for (size_t k = 0; only && k < n_only; k++)
			listed |= strcmp(only[k], g->uuid) == 0;
		if (!listed)
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%sGPU %lld (%s)",
					shown++ ? ", " : "", (long long)g->index, g->uuid);
	}
}

/* ", device /dev/a, device /dev/b" for only (or all of l's devices when only is NULL). */
static void describe_devices(const struct dg_lease_info *l, const char *const *only, size_t n_only,
			     char *buf, size_t len)
{
	size_t off = strlen(buf);
	size_t n = only ? n_only : l->n_devices;

	for (size_t i = 0; i < n && off < len; i++) {
		const char *path = only ? only[i] : l->devices[i].path;
		/* Read and write goes without saying; anything else is shown. */
		const char *acc = only ? NULL : l->devices[i].access;
		bool odd = acc && strcmp(acc, "rw") != 0;
		bool block = !only && l->devices[i].type && strcmp(l->devices[i].type, "b") == 0;

		off += (size_t)snprintf(buf + off, len - off, "%s%sdevice %s%s%s%s",
					off ? ", " : "", block ? "block " : "", path,
					odd ? " (" : "", odd ? acc : "", odd ? ")" : "");
	}
}

static void print_nodes(const struct dg_node_status *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("  %-24s %s\n", nodes[i].path, nodes[i].status);
}

static const char *who(const struct dg_lease_info *l)
{
	return l->container ? l->container : l->cgroup;
}

static void render_grant(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_grant_reply *r = &reply->grant;
	char text[2048];

	(void)cli;
	if (r->n_granted == 0 && r->n_granted_devices == 0) {
		describe_gpus(&r->lease, NULL, 0, text, sizeof(text));
		describe_devices(&r->lease, NULL, 0, text, sizeof(text));
		printf("%s already holds what was asked (%s); nothing new granted\n",
		       who(&r->lease), text);
	} else {
		text[0] = '\0';
		if (r->n_granted)
			describe_gpus(&r->lease, r->granted, r->n_granted, text, sizeof(text));
		describe_devices(&r->lease, r->granted_devices, r->n_granted_devices, text,
				 sizeof(text));
		printf("granted %s to %s (cgroup %s, PID %lld)\n", text, who(&r->lease),
		       r->lease.cgroup, (long long)r->lease.pid);
	}
	if (r->reason)
		printf("why: %s\n", r->reason);
	print_nodes(r->nodes, r->n_nodes);
	if (r->lease.expires)
		printf("the lease expires at %s (in %llds)%s\n", r->lease.expires,
		       (long long)r->lease.expires_in,
		       r->lease.kill_on_expiry ? "; holders are killed then" : "");
	for (size_t i = 0; i < r->n_warnings; i++)
		fprintf(stderr, "warning: %s\n", r->warnings[i]);
}

/* A waiting grant's place, on stderr: stdout stays the grant's result. */
static void print_place(void *ctx, const struct dg_wait_event *ev)
{
	const struct cli *cli = ctx;

	if (cli->json)
		return;
	fprintf(stderr, "waiting: position %lld of %lld%s%s%s\n", (long long)ev->position,
		(long long)ev->of, ev->reason ? " (" : "", ev->reason ? ev->reason : "",
		ev->reason ? ")" : "");
}

/*
 * --root PATH: the identity of the rootfs as this command finds it, which
 * devgated checks against the directory at PATH in the container's mount
 * namespace (the OCI hook sends the same for the bundle's rootfs).
 */
static int root_identity(struct cli *cli, struct dg_grant_req *g)
{
	auto_close int fd = open(g->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct dg_error err = { 0 };
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		dg_error_set(&err, DG_E_INVALID, errno, "--root %s: %m", g->root);
		dg_error_hint(&err, "give the rootfs as this host sees it, before the container "
				    "pivots into it");
		return cli_error(cli, &err);
	}
	g->root_id.dev = (uint64_t)st.st_dev;
	g->root_id.ino = (uint64_t)st.st_ino;
	g->has_root_id = true;
	return 0;
}

int cmd_grant(struct cli *cli, int argc, char **argv)
{
	struct dg_request req;
	bool done;
	int r = grant_parse(cli, argc, argv, &req, &done);

	if (r == 0 && !done && req.u.grant.root)
		r = root_identity(cli, &req.u.grant);
	if (r == 0 && !done)
		r = cmd_call_wait(cli, &req, render_grant, print_place);
	dg_arena_free(&req.arena); /* the --device list */
	return r;
}

/* Devices are checked at open(): a descriptor opened before keeps working. */
static void print_holders(const struct dg_holder_proc *h, size_t n, int64_t killed,
			  const char *again)
{
	for (size_t i = 0; i < n; i++)
		printf("  still open: PID %lld (%s) holds %s\n", (long long)h[i].pid, h[i].comm,
		       h[i].node);
	if (n && killed)
		printf("signalled %lld of %zu holder(s)\n", (long long)killed, n);
	else if (n)
		fprintf(stderr,
			"warning: %zu process(es) still use the device through an open "
			"descriptor\nhint: %s with --kill to end them\n",
			n, again);
}

static void render_revoke(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_revoke_reply *r = &reply->revoke;

	(void)cli;
	if (!r->has_lease) {
		printf("the container holds no GPU; nothing to revoke\n");
		return;
	}
	printf("revoked %zu GPU%s from %s:", r->n_revoked, r->n_revoked == 1 ? "" : "s",
	       who(&r->lease));
	for (size_t i = 0; i < r->n_revoked; i++)
		printf(" %s", r->revoked[i]);
	printf("\n");
	if (r->n_revoked_devices) {
		printf("revoked %zu device%s from %s:", r->n_revoked_devices,
		       r->n_revoked_devices == 1 ? "" : "s", who(&r->lease));
		for (size_t i = 0; i < r->n_revoked_devices; i++)
			printf(" %s", r->revoked_devices[i]);
		printf("\n");
	}
	print_nodes(r->nodes, r->n_nodes);
	if (r->lease.n_gpus == 0 && r->lease.n_devices == 0)
		printf("%s holds no GPU now; its device programs are restored\n", who(&r->lease));
	else if (r->lease.n_gpus == 0)
		printf("%s holds no GPU now\n", who(&r->lease));
	print_holders(r->holders, r->n_holders, r->killed, "revoke again");
}

/* --kill[=SIGNAL]: a number or a name (TERM, SIGTERM); KILL by default. */
static int parse_signal(struct cli *cli, const char *cmd, const char *s, int64_t *sig,
			bool *has_sig)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = { { "KILL", 9 }, { "TERM", 15 }, { "INT", 2 },  { "HUP", 1 },
		      { "QUIT", 3 }, { "USR1", 10 }, { "USR2", 12 } };
	uint32_t n;

	*has_sig = true;
	*sig = 9;
	if (!s)
		return 0;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (strcasecmp(s, names[i].name) == 0) {
			*sig = names[i].sig;
			return 0;
		}
	}
	if (parse_u32(s, &n) < 0 || n < 1 || n > 64)
		return cli_usage(cli, cmd,
				 "--kill wants a signal (KILL, TERM, or 1 to 64), not "
				 "'%s'",
				 s);
	*sig = n;
	return 0;
}

int revoke_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "container", required_argument, NULL, 'n' },
		{ "runtime", required_argument, NULL, OPT_RUNTIME },
		{ "gpu", required_argument, NULL, 'g' },
		{ "device", required_argument, NULL, 'd' },
		{ "missing-ok", no_argument, NULL, OPT_MISSING_OK },
		{ "kill", optional_argument, NULL, OPT_KILL },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dg_revoke_req *v = &req->u.revoke;
	int o, r = 0;

	*req = (struct dg_request){ .op = DG_OP_REVOKE };
	v->target.source = "cli";
	*done = false;
	while (r == 0 && (o = getopt_long(argc, argv, "p:c:n:g:d:jh", opts, NULL)) != -1) {
		bool handled;

		r = target_opt(cli, "revoke", o, &v->target, &v->gpus, &handled);
		if (handled)
			continue;
		if (o == 'd') {
			r = add_device(cli, "revoke", &req->arena, optarg, &v->devices,
				       &v->n_devices);
		} else if (o == OPT_MISSING_OK) {
			v->missing_ok = true;
		} else if (o == OPT_KILL) {
			r = parse_signal(cli, "revoke", optarg, &v->kill, &v->has_kill);
		} else if (o == 'h') {
			printf("%s%s", revoke_help, cmd_common_help);
			*done = true;
			return 0;
		} else {
			r = cli_usage(cli, "revoke", "unknown option");
		}
	}
	if (r == 0)
		r = cmd_no_more_args(cli, "revoke", argc, argv);
	if (r == 0 && !v->target.has_pid && !v->target.cgroup && !v->target.container)
		r = cli_usage(cli, "revoke",
			      "name the container with --pid, --cgroup or "
			      "--container");
	return r;
}

int cmd_revoke(struct cli *cli, int argc, char **argv)
{
	struct dg_request req;
	bool done;
	int r = revoke_parse(cli, argc, argv, &req, &done);

	if (r == 0 && !done)
		r = cmd_call(cli, &req, render_revoke);
	dg_arena_free(&req.arena); /* the --device list */
	return r;
}

/* ---- extend ---- */

/* "1h02m03s", "45s": the time left of a lease. */
static void format_left(int64_t s, char *buf, size_t len)
{
	if (s >= 86400)
		snprintf(buf, len, "%lldd%02lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, len, "%lldh%02lldm%02llds", (long long)(s / 3600),
			 (long long)(s % 3600 / 60), (long long)(s % 60));
	else if (s >= 60)
		snprintf(buf, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else
		snprintf(buf, len, "%llds", (long long)s);
}

static const char extend_help[] =
	"Usage: devgatectl extend TARGET (--by DURATION | --ttl DURATION) [--json]\n"
	"\n"
	"Moves the expiry of a lease granted with --ttl: --by adds DURATION to it (to\n"
	"now, if it passed), --ttl sets it to DURATION from now. A DURATION is a whole\n"
	"number with an optional unit s, m, h or d (90s, 10m, 2h, 1d); a lease ends at\n"
	"most 366 days from now. A lease without a ttl cannot be extended.\n"
	"\n"
	"TARGET (one of):\n"
	"  -p, --pid PID          a process of the container (host PID)\n"
	"  -c, --cgroup PATH      the container's cgroup, relative to the cgroup v2 root\n"
	"  -n, --container NAME   the label given at grant time, else a name or ID in\n"
	"                         Docker, podman, LXD or runc (--runtime RT: only there)\n"
	"HOW LONG (one of):\n"
	"  -b, --by DURATION      this much more time\n"
	"      --ttl DURATION     expire this long from now\n";

static void render_extend(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_lease_info *l = &reply->extend.lease;
	char left[32];

	(void)cli;
	format_left(l->expires_in, left, sizeof(left));
	printf("the lease of %s now expires at %s (in %s)\n", who(l), l->expires ? l->expires : "-",
	       left);
}

int extend_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "container", required_argument, NULL, 'n' },
		{ "runtime", required_argument, NULL, OPT_RUNTIME },
		{ "by", required_argument, NULL, 'b' },
		{ "ttl", required_argument, NULL, OPT_TTL },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dg_extend_req *x = &req->u.extend;
	const char *gpus = NULL;
	int o, r = 0;

	*req = (struct dg_request){ .op = DG_OP_EXTEND };
	x->target.source = "cli";
	*done = false;
	while (r == 0 && (o = getopt_long(argc, argv, "p:c:n:b:jh", opts, NULL)) != -1) {
		bool handled;

		r = target_opt(cli, "extend", o, &x->target, &gpus, &handled);
		if (handled)
			continue;
		if (o == 'b') {
			x->has_by = true;
			r = parse_duration_opt(cli, "extend", "--by", optarg, &x->by);
		} else if (o == OPT_TTL) {
			x->has_ttl = true;
			r = parse_duration_opt(cli, "extend", "--ttl", optarg, &x->ttl);
		} else if (o == 'h') {
			printf("%s%s", extend_help, cmd_common_help);
			*done = true;
			return 0;
		} else {
			r = cli_usage(cli, "extend", "unknown option");
		}
	}
	if (r == 0)
		r = cmd_no_more_args(cli, "extend", argc, argv);
	if (r == 0 && x->target.has_pid + !!x->target.cgroup + !!x->target.container != 1)
		r = cli_usage(cli, "extend",
			      "name the container with one of --pid, --cgroup or --container");
	if (r == 0 && x->has_by == x->has_ttl)
		r = cli_usage(cli, "extend", "say how much longer with one of --by or --ttl");
	return r;
}

int cmd_extend(struct cli *cli, int argc, char **argv)
{
	struct dg_request req;
	bool done;
	int r = extend_parse(cli, argc, argv, &req, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_extend);
}

/* ---- move ---- */

static const char move_help[] =
	"Usage: devgatectl move --gpu SEL[,SEL..] --from TARGET --to TARGET [--kill[=SIGNAL]]\n"
	"\n"
	"Moves GPUs the source container holds to another container in one step, each\n"
	"in its mode (exclusive or shared): the source loses them (its open() fails\n"
	"with EPERM, its nodes go) before the destination gets them, so the two never\n"
	"both have them and no other grant can take them in between. A destination\n"
	"without a lease gets one; its expiry becomes the source's when that is earlier.\n"
	"\n"
	"A TARGET is a host PID (digits), a cgroup path relative to the cgroup v2 root\n"
	"(starting with /), or a container label; pid:N, cgroup:PATH and container:LABEL\n"
	"say which outright. A name no lease carries is looked up in the runtimes, as\n"
	"grant --container NAME does; the destination then gets that name as its label.\n"
	"\n"
	"  -g, --gpu SEL[,SEL..]  GPUs of the source to move (index, UUID, PCI, all)\n"
	"  -f, --from TARGET      the container that holds them\n"
	"  -T, --to TARGET        the container that gets them\n"
	"      --kill[=SIGNAL]    end processes in the source that still hold a moved\n"
	"                         GPU open (opened before the move); KILL by default\n";

/* "pid:N", "cgroup:PATH", "container:LABEL", or by its look: digits, "/...", a label. */
static int parse_move_target(struct cli *cli, const char *s, struct dg_target_args *t)
{
	*t = (struct dg_target_args){ .source = "cli" };
	if (strncmp(s, "pid:", 4) == 0)
		return parse_target_pid(cli, "move", t, s + 4);
	if (strncmp(s, "cgroup:", 7) == 0)
		t->cgroup = s + 7;
	else if (strncmp(s, "container:", 10) == 0)
		t->container = s + 10;
	else if (*s >= '0' && *s <= '9')
		return parse_target_pid(cli, "move", t, s);
	else if (*s == '/')
		t->cgroup = s;
	else
		t->container = s;
	if (!*s || (t->cgroup && !*t->cgroup) || (t->container && !*t->container))
		return cli_usage(cli, "move", "an empty TARGET");
	return 0;
}

static void render_move(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_move_reply *r = &reply->move;
	char text[2048] = "";

	(void)cli;
	describe_gpus(&r->to, r->moved, r->n_moved, text, sizeof(text));
	printf("moved %s from %s to %s (cgroup %s, PID %lld)\n", text, who(&r->from), who(&r->to),
	       r->to.cgroup, (long long)r->to.pid);
	if (r->from.n_gpus == 0 && r->from.n_devices == 0)
		printf("%s holds no GPU now; its device programs are restored\n", who(&r->from));
	if (r->to.expires)
		printf("the lease of %s expires at %s (in %llds)\n", who(&r->to), r->to.expires,
		       (long long)r->to.expires_in);
	print_holders(r->holders, r->n_holders, r->killed, "kill them, or move");
}

int move_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done)
{
	static const struct option opts[] = {
		{ "gpu", required_argument, NULL, 'g' },
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 'T' },
		{ "kill", optional_argument, NULL, OPT_KILL },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dg_move_req *m = &req->u.move;
	bool from = false, to = false;
	int o, r = 0;

	*req = (struct dg_request){ .op = DG_OP_MOVE };
	*done = false;
	while (r == 0 && (o = getopt_long(argc, argv, "g:f:T:jh", opts, NULL)) != -1) {
		if (o == 'g') {
			m->gpus = optarg;
		} else if (o == 'f') {
			from = true;
			r = parse_move_target(cli, optarg, &m->from);
		} else if (o == 'T') {
			to = true;
			r = parse_move_target(cli, optarg, &m->to);
		} else if (o == OPT_KILL) {
			r = parse_signal(cli, "move", optarg, &m->kill, &m->has_kill);
		} else if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("%s%s", move_help, cmd_common_help);
			*done = true;
			return 0;
		} else {
			r = cli_usage(cli, "move", "unknown option");
		}
	}
	if (r == 0)
		r = cmd_no_more_args(cli, "move", argc, argv);
	if (r == 0 && (!m->gpus || !from || !to))
		r = cli_usage(cli, "move",
			      "name the GPUs, the source and the destination: "
			      "--gpu SEL --from TARGET --to TARGET");
	return r;
}

int cmd_move(struct cli *cli, int argc, char **argv)
{
	struct dg_request req;
	bool done;
	int r = move_parse(cli, argc, argv, &req, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_move);
}

/* ---- status ---- */

static const char status_help[] =
	"Usage: devgatectl status [--json]\n"
	"\n"
	"Lists leases: which container holds which GPUs and host devices, since when,\n"
	"shared or exclusive, and for a lease with a ttl when it expires and the time\n"
	"left (EXPIRES, LEFT; '-' for a lease that does not expire).\n";

/* exclusive, shared, or mixed when the lease holds both kinds. */
static const char *lease_mode(const struct dg_lease_info *l)
{
	size_t shared = 0;

	if (l->n_gpus == 0)
		return "-"; /* host devices only: never exclusive */
	for (size_t i = 0; i < l->n_gpus; i++)
		shared += l->gpus[i].shared;
	if (shared == 0)
		return "exclusive";
	return shared == l->n_gpus ? "shared" : "mixed";
}

static void render_status(const struct cli *cli, const union dg_reply *reply)
{
	static const char *const head[] = { "CONTAINER", "RUNTIME", "CGROUP",
					    "PID",	 "SINCE",   "EXPIRES",
					    "LEFT",	 "MODE",    "GPUS/DEVICES" };
	const struct dg_status_reply *r = &reply->status;
	struct table *t = table_new(ARRAY_SIZE(head), head);

	(void)cli;
	for (size_t i = 0; i < r->n_leases; i++) {
		const struct dg_lease_info *l = &r->leases[i];
		char pid[24], left[32], list[1024];
		const char *cells[ARRAY_SIZE(head)];

		snprintf(pid, sizeof(pid), "%lld", (long long)l->pid);
		if (l->has_expires_in)
			format_left(l->expires_in, left, sizeof(left));
		else
			snprintf(left, sizeof(left), "-");
		describe_gpus(l, NULL, 0, list, sizeof(list));
		describe_devices(l, NULL, 0, list, sizeof(list));
		cells[0] = l->container;
		cells[1] = l->runtime ? l->runtime : "-";
		cells[2] = l->cgroup;
		cells[3] = pid;
		cells[4] = l->since;
		cells[5] = l->expires ? l->expires : "-";
		cells[6] = left;
		cells[7] = lease_mode(l);
		cells[8] = list;
		table_add(t, cells);
	}
	if (r->n_leases)
		table_print(t, stdout);
	else
		printf("no leases: every GPU is free\n");
	table_free(t);
}

int cmd_status(struct cli *cli, int argc, char **argv)
{
	struct dg_request req = { .op = DG_OP_STATUS };
	bool done;
	int r = cmd_common_options(cli, "status", status_help, argc, argv, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_status);
}

/* ---- watch ---- */

static const char watch_help[] =
	"Usage: devgatectl watch [--json]\n"
	"\n"
	"Prints lease changes as they happen (granted, revoked, released, expired,\n"
	"extended), one per line, until interrupted; also GPUs of a lease that vanished\n"
	"from the host or came back (vanished, restored), and leases whose nodes moved\n"
	"to a reloaded driver's numbers (refreshed). With --json each line is one JSON\n"
	"object.\n";

static void print_event(const struct cli *cli, const union dg_stream_event *ev)
{
	const struct dg_watch_event *w = &ev->watch;

	(void)cli;
	printf("%s %s (cgroup %s):", w->type, who(&w->lease), w->lease.cgroup);
	for (size_t i = 0; i < w->n_gpus; i++)
		printf(" %s", w->gpus[i]);
	printf("\n");
	fflush(stdout);
}

int cmd_watch(struct cli *cli, int argc, char **argv)
{
	struct dg_request req = { .op = DG_OP_WATCH };
	bool done;
	int r = cmd_common_options(cli, "watch", watch_help, argc, argv, &done);

	if (r < 0 || done)
		return r;
	return cmd_stream(cli, &req, NULL, print_event);
}

/* ---- rescan ---- */

static const char rescan_help[] =
	"Usage: devgatectl rescan [--json]\n"
	"\n"
	"Makes devgated re-read the host's GPUs now, as it does on kernel uevents and\n"
	"SIGHUP, and prints what changed. A GPU that vanished stays listed as unusable\n"
	"(its leases are kept; holders get a 'vanished' watch event); a new one can be\n"
	"granted at once. Root or devgated's admin-group only.\n";

static void print_uuids(const char *what, const char *const *v, size_t n)
{
	if (!n)
		return;
	printf("%s:", what);
	for (size_t i = 0; i < n; i++)
		printf(" %s", v[i]);
	printf("\n");
}

static void render_rescan(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_rescan_reply *r = &reply->rescan;

	(void)cli;
	printf("%lld GPU(s) listed; %zu appeared, %zu vanished, %zu changed\n", (long long)r->gpus,
	       r->n_appeared, r->n_vanished, r->n_changed);
	print_uuids("appeared", r->appeared, r->n_appeared);
	print_uuids("vanished", r->vanished, r->n_vanished);
	print_uuids("changed", r->changed, r->n_changed);
}

int cmd_rescan(struct cli *cli, int argc, char **argv)
{
	struct dg_request req = { .op = DG_OP_RESCAN };
	bool done;
	int r = cmd_common_options(cli, "rescan", rescan_help, argc, argv, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_rescan);
}
