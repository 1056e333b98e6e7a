// SPDX-License-Identifier: Apache-2.0
/*
 * devgatectl cdi generate: a CDI spec (cdiVersion 0.5.0, read by podman,
 * containerd, CRI-O and Docker >= 25) with one device per GPU, by index and
 * by UUID, plus "all", plus one per alias devgated's devgate.conf defines. A
 * device adds its nodes and devgate's createRuntime hook with --gpu (or
 * --alias); the spec adds the control nodes and the poststop hook.
 *
 * The nodes carry permissions "m" only: the runtime may create them, but
 * reading and writing stay with devgate's grant, so the GPU is leased
 * (exclusive unless shared) and can still be revoked.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "driver.h"
#include "gpu.h"
#include "protocol.h"
#include "util.h"

#define CDI_VERSION "0.5.0"
#define DEFAULT_KIND "devgate.io/gpu"
#define DEFAULT_HOOK "/usr/bin/devgate-hook"
#define HOOK_ENV "PATH=/usr/sbin:/usr/bin:/sbin:/bin"

static const char cdi_help[] =
	"Usage: devgatectl cdi generate [OPTIONS]\n"
	"\n"
	"Writes a CDI spec for this host's GPUs: devices KIND=INDEX, KIND=UUID,\n"
	"KIND=INDEX:GI for each MIG instance (also KIND=MIG-<uuid> where devgated\n"
	"knows it from NVML) and\n"
	"KIND=all, each adding its /dev node and devgate's OCI hook, so that\n"
	"'podman run --device devgate.io/gpu=0' leases GPU 0 through devgated; and\n"
	"KIND=NAME for each alias in devgated's devgate.conf (one GPU of its id).\n"
	"\n"
	"  -o, --output FILE      write FILE atomically (default: stdout); CDI\n"
	"                         runtimes read /etc/cdi/*.json and /var/run/cdi/*.json\n"
	"  -k, --kind V/C         device kind (default devgate.io/gpu)\n"
	"      --host-root DIR    read GPUs under DIR (default: the running devgated's, else /)\n"
	"      --hook PATH        devgate-hook as the runtime runs it (default\n"
	"                         /usr/bin/devgate-hook)\n"
	"      --driver CAPS      the host driver's files every device mounts, read-only:\n"
	"                         utility, compute, video, graphics, all (default) or none\n"
	"The hook talks to the socket given with the global -s/--socket.\n";

/* An alias of devgated's, copied out of its reply. */
struct cdi_alias {
	char name[64];
	char product[16]; /* "10de:2330" */
};

struct cdi_opts {
	unsigned int driver_caps; /* DG_DRV_*: the driver's files the spec mounts */
	const char *kind;
	const char *hook;
	const char *socket; /* NULL: the default */
	struct cdi_alias aliases[64];
	size_t n_aliases;
};

/* vendor/class: vendor of [A-Za-z0-9._-], class of [A-Za-z0-9_-]. */
static bool kind_valid(const char *kind)
{
	const char *slash = strchr(kind, '/');

	if (!slash || slash == kind || !slash[1] || strchr(slash + 1, '/'))
		return false;
	for (const char *p = kind; *p; p++) {
		bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9');

		if (!alnum && *p != '-' && *p != '_' && *p != '/' && !(*p == '.' && p < slash))
			return false;
	}
	return true;
}

static json_object *strings(const char *const *v, size_t n)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < n; i++) {
		if (v[i])
			json_object_array_add(a, json_object_new_string(v[i]));
	}
	return a;
}

/* opt is "--gpu" or "--alias"; value NULL for neither. */
static json_object *hook_obj(const struct cdi_opts *o, const char *stage, const char *opt,
			     const char *value)
{
	json_object *h = json_object_new_object();
	const char *env[] = { HOOK_ENV };
	const char *args[] = {
		"devgate-hook", o->socket ? "--socket" : NULL, o->socket, stage, value ? opt : NULL,
		value,
	};

	json_object_object_add(h, "hookName", json_object_new_string(stage));
	json_object_object_add(h, "path", json_object_new_string(o->hook));
	json_object_object_add(h, "args", strings(args, ARRAY_SIZE(args)));
	json_object_object_add(h, "env", strings(env, ARRAY_SIZE(env)));
	return h;
}

static json_object *node_obj(const struct dg_node *n)
{
	json_object *o = json_object_new_object();
	char path[64];

	snprintf(path, sizeof(path), "/dev/%s", n->name);
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "type", json_object_new_string(n->block ? "b" : "c"));
	json_object_object_add(o, "major", json_object_new_int64(n->major));
	json_object_object_add(o, "minor", json_object_new_int64(n->minor));
	json_object_object_add(o, "permissions", json_object_new_string("m"));
	return o;
}

/* What one CDI device stands for: a GPU, every GPU, or an alias's GPUs. */
struct cdi_device {
	const char *name;
	const char *opt; /* the hook's option: --gpu or --alias */
	const char *value;
	const struct dg_gpu *only;
	const char *product;	    /* only GPUs of this vendor:device id */
	const struct dg_mig_gi *gi; /* a MIG instance of only, not all of it */
};

static bool device_has(const struct cdi_device *c, const struct dg_gpu *g)
{
	char id[16];

	snprintf(id, sizeof(id), "%04x:%04x", g->vendor, g->device);
	return !g->problem[0] && (!c->only || g == c->only) &&
	       (!c->product || strcmp(id, c->product) == 0);
}

/* One CDI device: nodes of the GPUs it stands for, one hook granting them. */
static json_object *device_obj(const struct dg_inventory *inv, const struct cdi_opts *o,
			       const struct cdi_device *c)
{
	json_object *dev = json_object_new_object(), *edits = json_object_new_object();
	json_object *nodes = json_object_new_array(), *hooks = json_object_new_array();
	bool vendors[DG_VENDORS] = { false };

	for (size_t i = 0; i < inv->n_gpus; i++) {
		struct dg_node node = { 0 };

		if (!device_has(c, &inv->gpus[i]))
			continue;
		gpu_node(inv, &inv->gpus[i], &node);
		json_object_array_add(nodes, node_obj(&node));
		vendors[inv->gpus[i].family] = true;
	}
	for (size_t i = 0; c->gi && i <= c->gi->n_ci; i++) {
		struct dg_node node;

		mig_cap_node(inv, i ? c->gi->ci[i - 1].minor : c->gi->minor, &node);
		json_object_array_add(nodes, node_obj(&node));
	}
	/* Other vendors' control nodes (/dev/kfd) go with their GPUs' devices. */
	for (size_t i = 0; i < inv->n_ctl; i++) {
		if (inv->ctl_vendor[i] != DG_VENDOR_NVIDIA && vendors[inv->ctl_vendor[i]])
			json_object_array_add(nodes, node_obj(&inv->ctl[i]));
	}
	json_object_array_add(hooks, hook_obj(o, "createRuntime", c->opt, c->value));
	json_object_object_add(edits, "deviceNodes", nodes);
	json_object_object_add(edits, "hooks", hooks);
	json_object_object_add(dev, "name", json_object_new_string(c->name));
	json_object_object_add(dev, "containerEdits", edits);
	return dev;
}

/*
 * "all" for the hook, unless GPUs were left out: then the others' UUIDs, so
 * the device asks for what it carries nodes of (devgated's "all" takes an
 * unusable GPU too, and would fail on it).
 */
static void all_selector(const struct dg_inventory *inv, char *buf, size_t len)
{
	bool left_out = false;
	size_t off = 0;

	for (size_t i = 0; i < inv->n_gpus; i++)
		left_out |= inv->gpus[i].problem[0] != '\0';
	snprintf(buf, len, "%s", left_out ? "" : "all");
	for (size_t i = 0; left_out && i < inv->n_gpus && off < len; i++) {
		if (!inv->gpus[i].problem[0])
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
						inv->gpus[i].uuid);
	}
}

/* A device per alias with a usable GPU, unless its name is taken (an index, "all"). */
static void alias_devices(const struct dg_inventory *inv, const struct cdi_opts *o,
			  json_object *devices)
{
	for (size_t i = 0; i < o->n_aliases; i++) {
		const struct cdi_alias *al = &o->aliases[i];
		struct cdi_device c = { al->name, "--alias", al->name, NULL, al->product };
		bool taken = strcmp(al->name, "all") == 0, any = false;

		for (size_t g = 0; g < inv->n_gpus; g++) {
			char index[16];

			snprintf(index, sizeof(index), "%u", inv->gpus[g].index);
			taken |= strcmp(index, al->name) == 0 ||
				 strcasecmp(inv->gpus[g].uuid, al->name) == 0;
			any |= device_has(&c, &inv->gpus[g]);
		}
		if (taken || !any)
			fprintf(stderr, "devgatectl: no device for alias %s: %s\n", al->name,
				taken ? "its name is a GPU's" : "no usable GPU has its id");
		else
			json_object_array_add(devices, device_obj(inv, o, &c));
	}
}

static json_object *mount_obj(const char *host, const char *path)
{
	static const char *const ro[] = { "ro", "nosuid", "nodev", "bind" };
	json_object *m = json_object_new_object();

	json_object_object_add(m, "hostPath", json_object_new_string(host));
	json_object_object_add(m, "containerPath", json_object_new_string(path));
	json_object_object_add(m, "options", strings(ro, ARRAY_SIZE(ro)));
	return m;
}

/*
 * The driver's files, as grant --driver mounts them: each at the host's
 * path, a library also at its soname, so no ldconfig has to run inside.
 */
static json_object *driver_mounts(const struct dg_inventory *inv, unsigned int caps)
{
	auto_close int root = open(inv->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	json_object *mounts = json_object_new_array();
	struct dg_driver drv;

	if (!caps || root < 0 || driver_discover(root, &drv) < 0)
		return mounts;
	for (size_t i = 0; i < drv.n; i++) {
		const struct dg_driver_file *f = &drv.files[i];
		char host[PATH_MAX], to[DG_DRIVER_TARGETS][DG_DRIVER_TARGET_MAX];
		size_t n;

		if (!(f->caps & caps))
			continue;
		snprintf(host, sizeof(host), "%s%s",
			 strcmp(inv->host_root, "/") ? inv->host_root : "", f->path);
		/* The image's layout is not known here: its loader directory is the multiarch one.
		 */
		n = driver_targets(f, driver_ld_dirs[0], to);
		for (size_t k = 0; k < n; k++)
			json_object_array_add(mounts, mount_obj(host, to[k]));
	}
	return mounts;
}

/* A device per MIG instance of a usable GPU: KIND=INDEX:GI, the hook's --gpu UUID:GI. */
static void instance_devices(const struct dg_inventory *inv, const struct cdi_opts *o,
			     json_object *devices)
{
	for (size_t i = 0; inv->majors.has_caps && i < inv->n_gpus; i++) {
		const struct dg_gpu *g = &inv->gpus[i];

		for (size_t j = 0; !g->problem[0] && j < g->n_gi; j++) {
			char name[32], sel[sizeof(g->uuid) + 16];

			const char *mig = g->gi[j].n_ci ? g->gi[j].ci[0].uuid : "";

			snprintf(name, sizeof(name), "%u:%u", g->index, g->gi[j].id);
			snprintf(sel, sizeof(sel), "%s:%u", g->uuid, g->gi[j].id);
			json_object_array_add(
				devices, device_obj(inv, o,
						    &(struct cdi_device){ name, "--gpu", sel, g,
									  NULL, &g->gi[j] }));
			/* Also by NVML's MIG UUID, as k8s and nvidia-smi name it, where known. */
			if (mig[0])
				json_object_array_add(
					devices,
					device_obj(inv, o,
						   &(struct cdi_device){ mig, "--gpu", mig, g, NULL,
									 &g->gi[j] }));
		}
	}
}

static json_object *spec_build(const struct dg_inventory *inv, const struct cdi_opts *o)
{
	char all[DG_MAX_GPUS * 82];
	json_object *spec = json_object_new_object(), *devices = json_object_new_array();
	json_object *edits = json_object_new_object(), *nodes = json_object_new_array();
	json_object *hooks = json_object_new_array();

	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *g = &inv->gpus[i];
		char index[16];

		if (g->problem[0]) {
			fprintf(stderr, "devgatectl: leaving GPU %u out: %s\n", g->index,
				g->problem);
			continue;
		}
		snprintf(index, sizeof(index), "%u", g->index);
		json_object_array_add(
			devices,
			device_obj(inv, o, &(struct cdi_device){ index, "--gpu", g->uuid, g }));
		json_object_array_add(
			devices,
			device_obj(inv, o, &(struct cdi_device){ g->uuid, "--gpu", g->uuid, g }));
	}
	instance_devices(inv, o, devices);
	all_selector(inv, all, sizeof(all));
	if (all[0])
		json_object_array_add(
			devices, device_obj(inv, o, &(struct cdi_device){ "all", "--gpu", all }));
	alias_devices(inv, o, devices);
	/* NVIDIA's control nodes for every device of the spec, as before. */
	for (size_t i = 0; i < inv->n_ctl; i++) {
		if (inv->ctl_vendor[i] == DG_VENDOR_NVIDIA)
			json_object_array_add(nodes, node_obj(&inv->ctl[i]));
	}
	json_object_array_add(hooks, hook_obj(o, "poststop", NULL, NULL));
	json_object_object_add(edits, "deviceNodes", nodes);
	json_object_object_add(edits, "hooks", hooks);
	json_object_object_add(edits, "mounts", driver_mounts(inv, o->driver_caps));
	json_object_object_add(spec, "cdiVersion", json_object_new_string(CDI_VERSION));
	json_object_object_add(spec, "kind", json_object_new_string(o->kind));
	json_object_object_add(spec, "devices", devices);
	json_object_object_add(spec, "containerEdits", edits);
	return spec;
}

static int write_spec(const char *output, const char *text, struct dg_error *err)
{
	char dir[PATH_MAX];
	auto_close int dfd = -1;
	const char *name;
	int r;

	r = path_parent(output, dir, sizeof(dir), &name);
	if (r < 0 || !*name)
		return dg_error_set(err, DG_E_INVALID, EINVAL, "--output '%s' names no file",
				    output);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return dg_error_set(err, DG_E_INVALID, errno, "cannot open directory %s: %m", dir);
	r = write_file_atomic_at(dfd, name, text, strlen(text), 0644, true);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot write %s: %s", output,
				    strerror(-r));
	return 0;
}

/* The MIG UUIDs devgated had from NVML, which this command does not load. */
static void nvml_names(const struct dg_list_gpu *g, struct dg_gpu *mine)
{
	for (size_t j = 0; j < g->n_instances; j++) {
		const struct dg_instance_info *in = &g->instances[j];
		const struct dg_mig_gi *found = mig_find_gi(mine, (uint32_t)in->gi);
		struct dg_mig_gi *gi = found ? &mine->gi[found - mine->gi] : NULL;

		for (size_t c = 0; gi && c < in->n_cis && c < gi->n_ci; c++) {
			if (in->cis[c].uuid && gi->ci[c].id == (uint32_t)in->cis[c].ci)
				snprintf(gi->ci[c].uuid, sizeof(gi->ci[c].uuid), "%s",
					 in->cis[c].uuid);
		}
	}
}

/*
 * What devgated knows beyond the files: GPUs its gpu-allow list excludes, or
 * that it cannot grant (a driver reload it has not been restarted for), and
 * MIG UUIDs.
 * Nothing when it does not answer or reads another host root.
 */
static void daemon_states(struct cli *cli, struct dg_inventory *inv, struct cdi_opts *o)
{
	struct dg_request req = { .op = DG_OP_LIST };
	struct dg_error err = { 0 };
	struct dg_arena a = { 0 };
	union dg_reply reply;

	if (client_request(cli->socket, cli->timeout_s, &req, &reply, &a, &err) < 0 ||
	    strcmp(reply.list.host_root, inv->host_root) != 0) {
		dg_arena_free(&a);
		return;
	}
	for (size_t i = 0; i < reply.list.n_aliases && o->n_aliases < ARRAY_SIZE(o->aliases); i++) {
		struct cdi_alias *al = &o->aliases[o->n_aliases++];

		snprintf(al->name, sizeof(al->name), "%s", reply.list.aliases[i].name);
		snprintf(al->product, sizeof(al->product), "%s", reply.list.aliases[i].product);
	}
	for (size_t i = 0; i < reply.list.n_gpus; i++) {
		const struct dg_list_gpu *g = &reply.list.gpus[i];
		struct dg_gpu *mine = NULL;

		for (size_t k = 0; k < inv->n_gpus && !mine; k++) {
			if (strcasecmp(inv->gpus[k].uuid, g->gpu.uuid) == 0)
				mine = &inv->gpus[k];
		}
		if (!mine || mine->problem[0])
			continue;
		nvml_names(g, mine);
		if (strcmp(g->state, "excluded") == 0)
			snprintf(mine->problem, sizeof(mine->problem),
				 "not in devgated's gpu-allow list");
		else if (g->gpu.problem)
			snprintf(mine->problem, sizeof(mine->problem), "devgated: %s",
				 g->gpu.problem);
	}
	dg_arena_free(&a);
}

static int generate(struct cli *cli, const char *host_root, const char *output, struct cdi_opts *o)
{
	struct dg_inventory *inv = NULL;
	auto_json json_object *spec = NULL;
	struct dg_error err = { 0 };
	const char *text;
	int r;

	r = inventory_discover(host_root, &inv, &err);
	if (r < 0)
		return cli_error(cli, &err);
	if (inv->n_gpus == 0) {
		inventory_free(inv);
		dg_error_set(&err, DG_E_NO_GPU, ENODEV, "no GPU under %s: nothing to describe",
			     host_root);
		return cli_error(cli, &err);
	}
	daemon_states(cli, inv, o);
	spec = spec_build(inv, o);
	inventory_free(inv);
	text = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PRETTY |
							    JSON_C_TO_STRING_SPACED |
							    JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!output) {
		puts(text);
		return 0;
	}
	r = write_spec(output, text, &err);
	if (r < 0)
		return cli_error(cli, &err);
	fprintf(stderr, "wrote %s\n", output);
	return 0;
}

/*
 * The spec describes the GPUs the hook's devgated will grant: those under
 * its host root, which the running daemon tells; / when none answers.
 */
static const char *daemon_host_root(struct cli *cli, struct dg_arena *a)
{
	struct dg_request req = { .op = DG_OP_PING };
	struct dg_error err = { 0 };
	union dg_reply reply;

	if (client_request(cli->socket, cli->timeout_s, &req, &reply, a, &err) < 0 ||
	    !reply.ping.has_settings)
		return "/";
	return reply.ping.settings.host_root;
}

enum {
	OPT_HOST = 256,
	OPT_HOOK,
	OPT_DRIVER
};

int cmd_cdi(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "kind", required_argument, NULL, 'k' },
		{ "host-root", required_argument, NULL, OPT_HOST },
		{ "hook", required_argument, NULL, OPT_HOOK },
		{ "driver", required_argument, NULL, OPT_DRIVER },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cdi_opts o = { .kind = DEFAULT_KIND,
			      .hook = DEFAULT_HOOK,
			      .driver_caps = DG_DRV_ALL };
	char bad[32];
	const char *output = NULL, *host_root = NULL;
	struct dg_arena arena = { 0 };
	int c, r;

	while ((c = getopt_long(argc, argv, "o:k:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 'k':
			o.kind = optarg;
			break;
		case OPT_HOST:
			host_root = optarg;
			break;
		case OPT_HOOK:
			o.hook = optarg;
			break;
		case OPT_DRIVER:
			if (strcmp(optarg, "none") == 0)
				o.driver_caps = 0;
			else if (driver_caps_parse(optarg, &o.driver_caps, bad, sizeof(bad)) < 0)
				return cli_usage(cli, "cdi",
						 "--driver: '%s' is not utility, compute, video, "
						 "graphics, all or none",
						 bad);
			break;
		case 'h':
			printf("%s  -h, --help             show this help\n", cdi_help);
			return 0;
		default:
			return cli_usage(cli, "cdi", "unknown option");
		}
	}
	if (optind >= argc || strcmp(argv[optind], "generate") != 0)
		return cli_usage(cli, "cdi", "the only verb is 'generate'");
	if (optind + 1 < argc)
		return cli_usage(cli, "cdi", "unexpected argument '%s'", argv[optind + 1]);
	if (!kind_valid(o.kind))
		return cli_usage(cli, "cdi", "kind '%s' is not VENDOR/CLASS (e.g. devgate.io/gpu)",
				 o.kind);
	if (o.hook[0] != '/')
		return cli_usage(cli, "cdi", "--hook needs an absolute path");
	if (strcmp(cli->socket, DG_DEFAULT_SOCKET) != 0)
		o.socket = cli->socket;
	if (!host_root)
		host_root = daemon_host_root(cli, &arena);
	r = generate(cli, host_root, output, &o);
	dg_arena_free(&arena);
	return r;
}
