// SPDX-License-Identifier: Apache-2.0
/*
 * devgated: grants GPUs to running containers through cgroup v2 device
 * programs. Start-up order: check privileges, discover GPUs, lock the pin
 * root, the socket and the state directory (one devgated each), open the
 * state, create or reuse the BPF maps, load leases, reconcile the
 * kernel with them, open the sockets, install the seccomp filter, then
 * serve.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gate/attach_watch.h"
#include "gate/bpfgate.h"
#include "cleanup.h"
#include "core/config.h"
#include "sys/confine.h"
#include "core/daemon.h"
#include "view/events.h"
#include "watch/expiry.h"
#include "watch/heal.h"
#include "sys/fault.h"
#include "sys/prober.h"
#include "grant/grant.h"
#include "grant/refresh.h"
#include "gate/guard.h"
#include "log.h"
#include "metrics/metrics.h"
#include "metrics/metrics_http.h"
#include "inventory/nvml.h"
#include "node/nodes.h"
#include "lease/policy.h"
#include "protocol.h"
#include "reconcile.h"
#include "inventory/reload.h"
#include "inventory/rescan.h"
#include "server/server.h"
#include "server/waiting.h"
#include "lease/state.h"
#include "util.h"
#include "version.h"
#include "view/metrics_page.h"
#include "view/view.h"
#include "watch/watch.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: devgated [OPTIONS]\n"
		"\n"
		"Grant GPUs to running containers and take them back, through cgroup v2\n"
		"BPF device programs and device nodes made inside the container.\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH       control socket (default %s)\n"
		"      --state-dir DIR     where leases are kept (default %s)\n"
		"      --pin-root DIR      BPF pin directory on bpffs (default %s)\n"
		"      --host-root DIR     read GPUs from DIR instead of / (test fixtures)\n"
		"      --cgroup-root DIR   the cgroup v2 mount to use (default: the last usable\n"
		"                          one in /proc/self/mountinfo)\n"
		"      --node-mode MODE    mode of nodes made in containers (default 0666)\n"
		"      --node-owner U:G    owner of those nodes (default 0:0)\n"
		"      --recheck-ms MS     how often leased cgroups are re-checked (default 1000)\n"
		"      --heal-ms MS        how often leased cgroups' device programs are\n"
		"                          compared with what devgate left there, to put back\n"
		"                          a displaced gate (default 10; longer with over 20\n"
		"                          leases, 1 ms per 2; 0: off)\n"
		"      --no-attach-events  do not heal on attach events where the kernel\n"
		"                          allows tracing programs (BTF, fexit)\n"
		"      --gate-mode MODE    beside (default): devgate's gate goes after the\n"
		"                          runtime's device program, so the runtime can still\n"
		"                          change its own; replace: it takes that program's\n"
		"                          place (read at start)\n"
		"      --socket-group GROUP  members may list, status, watch, events, metrics\n"
		"                          (socket 0660; default: root only)\n"
		"      --admin-group GROUP members may also grant and revoke (default: root only)\n"
		"      --max-clients N     connections served at once (default 256); root\n"
		"                          always gets in\n"
		"      --max-clients-per-uid N  connections of one uid but root (default 32)\n"
		"      --max-streams-per-uid N  watch and events streams of one uid but root\n"
		"                          (default 8)\n"
		"      --reserved-clients N  of max-clients, slots kept for root and\n"
		"                          admin-group (default 64)\n"
		"      --client-timeout-ms MS  cut a client idle or mid-request this long\n"
		"                          (default 5000; streams are exempt)\n"
		"      --metrics-listen ADDR:PORT  serve Prometheus metrics at /metrics (off by\n"
		"                          default; numeric address, e.g. 127.0.0.1:9400)\n"
		"      --docker-socket PATH, --podman-storage DIR, --lxd-socket PATH,\n"
		"      --runc-root DIR, --lxc-path DIR, --cri-runc-root DIR\n"
		"                          where grant --container NAME looks names up (empty:\n"
		"                          not there); see devgate.conf(5)\n"
		"      --seccomp MODE      devgated's own syscall filter: on (default; other\n"
		"                          calls fail with EPERM), log (allowed, logged by\n"
		"                          the kernel) or off; --no-seccomp is 'off'\n"
		"      --gpu-allow IDS     grant only GPUs with these PCI vendor:device ids\n"
		"                          (\"10de:2330,10de:20b0\"); the rest are 'excluded'\n"
		"      --device-allow DEVS allow grant --device of these host devices beyond\n"
		"                          those safe in any container (/dev/null, tty...)\n"
		"                          and block devices: paths, MAJOR:MINOR or MAJOR:*,\n"
		"                          b:MAJOR:MINOR or b:MAJOR:* for block (\"/dev/sdb\")\n"
		"      --hook-allow-env    let OCI hooks honour NVIDIA_VISIBLE_DEVICES from\n"
		"                          container images (off: an image must not grant\n"
		"                          itself GPUs)\n"
		"      --config FILE       configuration file (default %s); options given\n"
		"                          here override it. See devgate.conf(5)\n"
		"      --check-config      check the configuration, print the settings in\n"
		"                          effect and exit, touching nothing\n"
		"  -v, --verbose           log debug messages, libbpf's included\n"
		"  -h, --help              show this help\n"
		"  -V, --version           show the version\n"
		"\n"
		"devgated runs in the foreground and logs to stderr. SIGHUP re-reads the\n"
		"configuration file's policy and the host's GPUs. See devgated(8).\n",
		DG_DEFAULT_SOCKET, DG_DEFAULT_STATE_DIR, DG_DEFAULT_PIN_ROOT, DG_DEFAULT_CONFIG);
}

/* The command line: where the configuration is, and settings over it. */
struct args {
	const char *config; /* --config, NULL for the default file */
	bool check;	    /* --check-config */
	size_t n_set;
	struct {
		const char *key;
		const char *value;
	} set[64];
};

enum {
	OPT_SET = 256, /* a long option named like its configuration key */
	OPT_CONFIG,
	OPT_CHECK,
	OPT_UNSET, /* --no-KEY: the boolean key KEY off */
	OPT_NO_SECCOMP,
};

static int add_set(struct args *a, const char *key, const char *value)
{
	if (a->n_set == ARRAY_SIZE(a->set))
		return log_error("too many options"), -E2BIG;
	a->set[a->n_set].key = key;
	a->set[a->n_set].value = value;
	a->n_set++;
	return 0;
}

/* Returns 0 to run, 1 to exit successfully, < 0 on a usage error. */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, OPT_SET },
		{ "pin-root", required_argument, NULL, OPT_SET },
		{ "host-root", required_argument, NULL, OPT_SET },
		{ "cgroup-root", required_argument, NULL, OPT_SET },
		{ "node-mode", required_argument, NULL, OPT_SET },
		{ "node-owner", required_argument, NULL, OPT_SET },
		{ "recheck-ms", required_argument, NULL, OPT_SET },
		{ "heal-ms", required_argument, NULL, OPT_SET },
		{ "socket-group", required_argument, NULL, OPT_SET },
		{ "admin-group", required_argument, NULL, OPT_SET },
		{ "max-clients", required_argument, NULL, OPT_SET },
		{ "max-clients-per-uid", required_argument, NULL, OPT_SET },
		{ "max-streams-per-uid", required_argument, NULL, OPT_SET },
		{ "reserved-clients", required_argument, NULL, OPT_SET },
		{ "client-timeout-ms", required_argument, NULL, OPT_SET },
		{ "metrics-listen", required_argument, NULL, OPT_SET },
		{ "docker-socket", required_argument, NULL, OPT_SET },
		{ "podman-storage", required_argument, NULL, OPT_SET },
		{ "lxd-socket", required_argument, NULL, OPT_SET },
		{ "runc-root", required_argument, NULL, OPT_SET },
		{ "lxc-path", required_argument, NULL, OPT_SET },
		{ "cri-runc-root", required_argument, NULL, OPT_SET },
		{ "hook-allow-env", no_argument, NULL, OPT_SET },
		{ "no-attach-events", no_argument, NULL, OPT_UNSET },
		{ "gate-mode", required_argument, NULL, OPT_SET },
		{ "seccomp", required_argument, NULL, OPT_SET },
		{ "gpu-allow", required_argument, NULL, OPT_SET },
		{ "device-allow", required_argument, NULL, OPT_SET },
		{ "no-seccomp", no_argument, NULL, OPT_NO_SECCOMP },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "check-config", no_argument, NULL, OPT_CHECK },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int o, li = 0, r = 0;

	while (r == 0 && (o = getopt_long(argc, argv, "s:vhV", opts, &li)) != -1) {
		switch (o) {
		case 's':
			r = add_set(a, "socket", optarg);
			break;
		case 'v':
			r = add_set(a, "log-level", "debug");
			break;
		case OPT_SET:
			r = add_set(a, opts[li].name, optarg ? optarg : "true");
			break;
		case OPT_UNSET:
			r = add_set(a, opts[li].name + strlen("no-"), "false");
			break;
		case OPT_NO_SECCOMP:
			r = add_set(a, "seccomp", "off");
			break;
		case OPT_CONFIG:
			a->config = optarg;
			break;
		case OPT_CHECK:
			a->check = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("devgated %s\n", DEVGATE_VERSION);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (r == 0 && optind < argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return r;
}

/* The command line, kept for reloads: its settings stay over the file's. */
static struct args cmdline;

/* Defaults, then the file, then the command line. */
static int configure(struct dg_config *c, const struct args *a, struct dg_error *err)
{
	int r = config_load(c, a->config ? a->config : DG_DEFAULT_CONFIG, a->config != NULL, err);

	for (size_t i = 0; r == 0 && i < a->n_set; i++) {
		struct dg_error e = { 0 };

		r = config_set(c, a->set[i].key, a->set[i].value, &e);
		if (r < 0)
			dg_error_set(err, e.code, r, "--%s: %s", a->set[i].key, e.message);
	}
	return r;
}

static int load_config(struct dg_config *c, struct dg_error *err)
{
	return configure(c, &cmdline, err);
}

/* Capabilities devgated works with; everything else is dropped at start. */
static const cap_value_t kept_caps[] = {
	CAP_SYS_ADMIN,	CAP_BPF,	  CAP_PERFMON,		CAP_NET_ADMIN,	CAP_MKNOD,
	CAP_SYS_PTRACE, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,	CAP_SYS_CHROOT, CAP_CHOWN,
	CAP_FOWNER,	CAP_SYS_RESOURCE, CAP_NET_BIND_SERVICE, CAP_KILL,	CAP_SETUID,
	CAP_SETGID,
};

static bool cap_has(cap_t caps, cap_value_t c)
{
	cap_flag_value_t v = CAP_CLEAR;

	return cap_get_flag(caps, c, CAP_EFFECTIVE, &v) == 0 && v == CAP_SET;
}

static int caps_setup(struct dg_error *err)
{
	cap_t cur = cap_get_proc(), want = cap_init();
	int r = 0;

	if (!cur || !want) {
		r = dg_error_set(err, DG_E_INTERNAL, errno, "libcap: %m");
		goto out;
	}
	if (!cap_has(cur, CAP_SYS_ADMIN) || !cap_has(cur, CAP_MKNOD) ||
	    !(cap_has(cur, CAP_BPF) || cap_has(cur, CAP_SYS_ADMIN))) {
		r = dg_error_set(err, DG_E_PERM, EPERM,
				 "devgated must run as root: it needs "
				 "CAP_SYS_ADMIN, CAP_BPF and CAP_MKNOD");
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(kept_caps); i++) {
		if (!cap_has(cur, kept_caps[i]))
			continue;
		cap_set_flag(want, CAP_PERMITTED, 1, &kept_caps[i], CAP_SET);
		cap_set_flag(want, CAP_EFFECTIVE, 1, &kept_caps[i], CAP_SET);
	}
	if (cap_set_proc(want) < 0)
		r = dg_error_set(err, DG_E_INTERNAL, errno, "cannot drop capabilities: %m");
out:
	cap_free(cur);
	cap_free(want);
	return r;
}

/* Tells systemd (Type=notify) that devgated serves, without libsystemd. */
static void notify_ready(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const char msg[] = "READY=1\nSTATUS=serving";
	auto_close int fd = -1;
	size_t len;

	if (!path || (path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(sa.sun_path))
		return;
	len = strlen(path);
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		(void)sendto(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL, (struct sockaddr *)&sa,
			     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
}

static int epoll_tag(struct daemon *d, int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int setup_signals(struct daemon *d)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	return d->signal_fd < 0 ? -errno : 0;
}

static void handle_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			struct dg_error err = { 0 };
			struct reload_result res;

			/* The policy first: the rescan applies it to what it finds. */
			(void)reload_run(d, "SIGHUP", &res, &err);
			err = (struct dg_error){ 0 };
			if (rescan_run(d, "SIGHUP", NULL, NULL, &err) < 0)
				log_warning("SIGHUP: cannot re-read the GPU inventory: %s",
					    err.message);
			continue;
		}
		log_info("received %s, shutting down; leases and gates stay in place",
			 strsignal((int)si.ssi_signo));
		d->quit = true;
	}
}

/* Renders the HTTP endpoint's page: the same one the "metrics" operation sends. */
static int render_metrics(void *d, char **ret, size_t *ret_len)
{
	return metrics_render(d, ret, ret_len);
}

/*
 * Starts the /metrics endpoint when --metrics-listen is set. libmicrohttpd's
 * epoll fd joins devgated's loop, so it runs no threads of its own.
 */
static int setup_metrics_http(struct daemon *d, struct dg_error *err)
{
	int r;

	if (!d->cfg->metrics_listen)
		return 0;
	r = metrics_http_start(d->cfg->metrics_listen, render_metrics, d, &d->http, err);
	if (r < 0)
		return r;
	r = epoll_tag(d, metrics_http_fd(d->http), TAG_METRICS);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot poll the metrics endpoint: %s",
				    strerror(-r));
	return 0;
}

/*
 * Opens the BPF maps. The leased cgroups are passed along: their gates
 * prove which maps are ours when the pins are gone.
 */
static int open_bpfgate(struct daemon *d, struct dg_error *err)
{
	int fds[64];
	size_t n = 0;
	int r;

	/* cgroup v1 alone: no cgroup takes a program, and no keeper cgroup can be made. */
	for (size_t i = 0; i < d->leases.n && n < ARRAY_SIZE(fds) && !d->cg.v1; i++) {
		if (cgroup_open_id(&d->cg, d->leases.v[i]->cgid, &fds[n]) == 0)
			n++;
	}
	r = bpfgate_open(d->cfg->pin_root, d->inv, d->cg.v1 ? -1 : d->cg.fd, fds, n, &d->bg, err);
	if (r == 0)
		guard_init(d->bg, fds, n, d->cfg->gate_beside);
	while (n)
		close(fds[--n]);
	return r;
}

/*
 * The listeners of state changes (struct daemon_hooks): a lease's change
 * goes to its expiry timer, the heal check, the wait queue and the watch
 * stream.
 */
static void on_lease_changed(struct daemon *d, const char *type, const struct lease *l,
			     const char *const *gpus, size_t n_gpus)
{
	struct dg_arena a = { 0 };
	union dg_stream_event ev = {
		.watch = { .type = type, .gpus = (const char **)gpus, .n_gpus = n_gpus },
	};

	expiry_note(d, l);
	/* The heal check sleeps while there is no lease: a new one wakes it. */
	if (strcmp(type, "granted") == 0)
		heal_wake(d);
	/* Any change but a grant may have freed a GPU for a waiting grant. */
	if (strcmp(type, "granted") != 0 && strcmp(type, "extended") != 0)
		waiting_wake(d->waiting, d->wake_ns);
	if (view_lease(d->inv, l, &ev.watch.lease, &a) == 0)
		server_broadcast(d, DG_OP_WATCH, &ev);
	dg_arena_free(&a);
}

static void on_capacity_changed(struct daemon *d)
{
	waiting_wake(d->waiting, d->wake_ns);
}

static void on_denied(struct daemon *d, const struct dg_denied_event *denied)
{
	union dg_stream_event ev = { .denied = *denied };

	server_broadcast(d, DG_OP_EVENTS, &ev);
}

/* Opens the uevent socket if it can; without it, SIGHUP and 'devgatectl rescan' still re-read. */
static void open_uevents(struct daemon *d)
{
	int r = rescan_open(d);

	if (r < 0)
		log_info("no kernel uevents (%s): GPUs that come or go are seen at SIGHUP or "
			 "'devgatectl rescan'",
			 strerror(-r));
}

/* Loads the attach watch if the kernel allows; without it the heal check finds displaced gates a
 * little later. */
static void open_attach_watch(struct daemon *d)
{
	int r;

	/* cgroup v1 alone: no program to displace; the heal check reads the devices lists. */
	if (!d->cfg->attach_events || d->cg.v1)
		return;
	r = attach_watch_open(heal_attach_changed, heal_attach_replaced, d, &d->attach);
	if (r == 0)
		log_info("displaced gates are healed on attach events");
	else
		log_info("no attach events (tracing programs: %s): displaced gates are found by "
			 "a check every %u ms",
			 strerror(-r), d->cfg->heal_ms);
}

/* The locks on the pin root and the socket, held for devgated's life. */
static int locks[2] = { -1, -1 };

/* The event loop: its epoll set, the wait queue's runtime, signals, and every descriptor tagged. */
static int setup_loop(struct daemon *d, struct dg_error *err)
{
	int r;

	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epfd < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "epoll: %m");
	if (waiting_new(d->epfd, d->metrics, &server_waiting_ops, d, &d->waiting) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	r = setup_signals(d);
	if (r == 0)
		r = epoll_tag(d, d->listen_fd, TAG_LISTEN);
	if (r == 0)
		r = epoll_tag(d, d->signal_fd, TAG_SIGNAL);
	if (r == 0)
		r = epoll_tag(d, d->inotify_fd, TAG_INOTIFY);
	if (r == 0)
		r = epoll_tag(d, d->timer_fd, TAG_TIMER);
	if (r == 0)
		r = epoll_tag(d, events_fd(d->events), TAG_EVENTS);
	if (r == 0 && d->attach)
		r = epoll_tag(d, attach_watch_fd(d->attach), TAG_ATTACH);
	if (r == 0)
		r = epoll_tag(d, d->heal_fd, TAG_HEAL);
	if (r == 0 && d->uevent_fd >= 0)
		r = epoll_tag(d, d->uevent_fd, TAG_UEVENT);
	if (r == 0)
		r = epoll_tag(d, d->expiry_fd, TAG_EXPIRY);
	if (r == 0 && d->v1exit_fd >= 0)
		r = epoll_tag(d, d->v1exit_fd, TAG_V1EXIT);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot set up the event loop: %s",
				    strerror(-r));
	return 0;
}

static int daemon_setup(struct daemon *d, struct dg_error *err)
{
	int r;

	r = caps_setup(err);
	if (r < 0)
		return r;
	/* Forked while devgated holds nothing but its setup: no clients, maps or leases. */
	r = nvml_start(d->cfg->seccomp);
	if (r < 0)
		log_warning_errno(r, "cannot start the NVML probe (MIG profiles unknown): %m");
	r = inventory_discover(d->cfg->host_root, &d->inv, err);
	if (r < 0)
		return r;
	r = cg1root_open(&d->cg1);
	if (r < 0 && r != -ENOMEDIUM)
		log_warning_errno(r, "cannot open the cgroup v1 devices hierarchy: %m");
	r = cgroot_open(&d->cg, d->cfg->cgroup_root, err);
	/* cgroup v1 alone: its devices hierarchy keys and gates the containers. */
	if (r == -ENOMEDIUM && d->cg1.fd >= 0) {
		*err = (struct dg_error){ 0 };
		r = cgroot_open_v1(&d->cg, d->cg1.mount, cgroup1_devices_of_pid, err);
		if (r == 0)
			log_notice("no cgroup v2 is mounted: gating through the cgroup v1 devices "
				   "controller at %s alone (devices.allow and devices.deny; no BPF "
				   "program, no per-access counters)",
				   d->cg1.mount);
	}
	if (r < 0)
		return r;
	nvml_fill(d->inv, NULL);
	policy_apply(&d->cfg->policy, d->inv);
	r = cgroup_of_pid_in(&d->cg, getpid(), &d->self_cgroup);
	if (r < 0)
		log_warning_errno(r, "cannot read devgated's own cgroup: %m");
	r = nodes_init(err);
	/*
	 * Before anything is changed: the pin root, the socket and (state_open)
	 * the state directory are this devgated's alone, or it stops here.
	 */
	if (r == 0)
		r = bpfgate_lock_root(d->cfg->pin_root, &locks[0], err);
	if (r == 0)
		r = server_lock(d, &locks[1], err);
	if (r == 0)
		r = state_open(d->cfg->state_dir,
			       strcmp(d->cfg->state_dir, DG_DEFAULT_STATE_DIR) == 0
				       ? DG_LEGACY_STATE_DIR
				       : NULL,
			       &d->state, err);
	if (r == 0)
		r = state_load(d->state, &d->leases, err);
	if (r == 0)
		r = open_bpfgate(d, err);
	if (r == 0) {
		r = metrics_new(&d->metrics);
		if (r < 0)
			dg_error_set(err, DG_E_INTERNAL, r, "cannot set up metrics: %s",
				     strerror(-r));
		else
			metrics_inc(d->metrics, METRIC_RECORDS_BROKEN, state_broken(d->state));
	}
	if (r == 0)
		r = events_open(d, err);
	if (r < 0)
		return r;
	open_attach_watch(d);
	open_uevents(d);
	r = watch_init(d);
	if (r == 0)
		r = heal_init(d);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot set up inotify or timers: %s",
				    strerror(-r));
	log_info("%zu GPU(s) under %s, cgroup %s at %s, %zu lease(s) on record", d->inv->n_gpus,
		 d->cfg->host_root, d->cg.v1 ? "v1 devices" : "v2",
		 d->cg.mount ? d->cg.mount : "(none)", d->leases.n);
	r = expiry_init(d);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot set up the expiry timer: %s",
				    strerror(-r));
	reconcile(d);
	/* Leases whose time ran out while devgated was down go before anyone is served. */
	expiry_run(d);
	r = server_listen(d, err);
	if (r < 0)
		return r;
	r = setup_loop(d, err);
	if (r < 0)
		return r;
	r = setup_metrics_http(d, err);
	if (r < 0)
		return r;
	/* Last: everything that needs more than the allow-list is done. */
	r = confine_daemon(d->cfg->seccomp, err);
	if (r == 0)
		fault_seccomp_probe();
	return r;
}

static void daemon_teardown(struct daemon *d)
{
	server_close(d);
	waiting_free(d->waiting);
	metrics_http_free(d->http);
	metrics_free(d->metrics);
	events_free(d->events);
	attach_watch_free(d->attach);
	rescan_close(d);
	nvml_stop();
	watch_fini(d);
	heal_fini(d);
	expiry_fini(d);
	lease_table_clear(&d->leases);
	guard_fini(d->bg);
	bpfgate_free(d->bg);
	state_close(d->state);
	nodes_fini();
	prober_release();
	cgroot_close(&d->cg);
	cg1root_close(&d->cg1);
	inventory_free(d->inv);
	free(d->self_cgroup);
	safe_close(d->signal_fd);
	safe_close(d->epfd);
	config_free(d->cfg);
	/* Last: the socket is gone, the state closed; another devgated may start now. */
	for (size_t i = 0; i < ARRAY_SIZE(locks); i++)
		locks[i] = safe_close(locks[i]);
}

/*
 * Handles one epoll event. Returns false for the heal check's timer, which
 * alone must not keep the spare helpers from being made.
 */
static bool dispatch(struct daemon *d, const struct epoll_event *ev)
{
	switch (ev->data.u64) {
	case TAG_LISTEN:
		server_accept(d);
		break;
	case TAG_SIGNAL:
		handle_signal(d);
		break;
	case TAG_INOTIFY:
		watch_handle(d);
		break;
	case TAG_TIMER:
		nvml_check();
		watch_tick(d);
		heal_recheck(d);
		server_tick(d);
		waiting_check(d->waiting);
		break;
	case TAG_EVENTS:
		events_consume(d);
		break;
	case TAG_METRICS:
		metrics_http_run(d->http);
		break;
	case TAG_ATTACH:
		(void)attach_watch_consume(d->attach);
		break;
	case TAG_HEAL:
		heal_tick(d);
		return false;
	case TAG_UEVENT:
		rescan_uevents(d);
		break;
	case TAG_EXPIRY:
		expiry_run(d);
		break;
	case TAG_V1EXIT:
		watch_v1_handle(d);
		break;
	default:
		if (ev->data.u64 & TAG_WAITER)
			waiting_event(d->waiting, ev->data.u64);
		else if (ev->data.u64 & TAG_LOOKUP)
			server_lookup_event(d, ev->data.u64);
		else
			server_client_event(d, ev->data.ptr, ev->events);
		break;
	}
	return true;
}

/*
 * Spares (the next node helper, the next gate copy) are made once the loop
 * has been idle this long: made right after a reply, they would hold up the
 * request a client sends next (a hook's poststop, a grant after a revoke).
 */
#define SPARE_IDLE_MS 10

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

static int run(struct daemon *d)
{
	struct epoll_event evs[32];
	bool spares_made = false;
	uint64_t busy_ns = now_mono_ns();

	notify_ready();
	log_info("devgated %s serving on %s", DEVGATE_VERSION, d->cfg->socket_path);
	while (!d->quit) {
		/* The HTTP endpoint may need a call before any fd is ready. */
		int http = metrics_http_timeout(d->http);
		uint64_t idle_ms = (now_mono_ns() - busy_ns) / 1000000;
		int spare_ms = idle_ms >= SPARE_IDLE_MS ? 0 : SPARE_IDLE_MS - (int)idle_ms;
		int wait_ms = min_timeout(http, min_timeout(waiting_timeout_ms(d->waiting),
							    spares_made ? -1 : spare_ms));
		int n = epoll_wait(d->epfd, evs, (int)ARRAY_SIZE(evs), wait_ms);
		bool busy = false;

		d->wake_ns = now_mono_ns();
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return log_error_errno(errno, "epoll_wait: %m");
		}
		for (int i = 0; i < n && !d->quit; i++)
			busy |= dispatch(d, &evs[i]);
		if (!d->quit)
			waiting_run(d->waiting);
		/* MHD asks to be run after every wait it gave a timeout for. */
		if (http >= 0 && !d->quit)
			metrics_http_run(d->http);
		if (busy) {
			spares_made = false;
			busy_ns = now_mono_ns();
		} else if (!spares_made && now_mono_ns() - busy_ns >= SPARE_IDLE_MS * 1000000ull) {
			nodes_prepare();
			guard_idle(d->bg);
			bpfgate_prepare(d->bg);
			spares_made = true;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct dg_config cfg;
	struct daemon d = {
		.cfg = &cfg,
		.cg = { .fd = -1 },
		.cg1 = { .fd = -1 },
		.epfd = -1,
		.listen_fd = -1,
		.signal_fd = -1,
		.inotify_fd = -1,
		.v1exit_fd = -1,
		.timer_fd = -1,
		.heal_fd = -1,
		.uevent_fd = -1,
		.expiry_fd = -1,
		.hooks = {
			.lease_changed = on_lease_changed,
			.capacity_changed = on_capacity_changed,
			.inventory_swapped = refresh_leases,
			.cgroup_ended = grant_release,
			.lease_expired = grant_expire,
			.denied = on_denied,
			.load_config = load_config,
		},
	};
	struct dg_error err = { 0 };
	struct args *args = &cmdline;
	int r;

	log_init("devgated", LOG_INFO);
	if (config_init(&cfg) < 0)
		return dg_code_info(DG_E_INTERNAL)->exit_code;
	r = parse_args(argc, argv, args);
	if (r == 0)
		r = configure(&cfg, args, &err);
	if (r != 0) {
		if (err.message[0])
			log_error("%s", err.message);
		if (err.hint[0])
			log_error("hint: %s", err.hint);
		config_free(&cfg);
		return r > 0 ? 0 : dg_code_info(err.code ? err.code : DG_E_INVALID)->exit_code;
	}
	if (args->check) {
		config_print(&cfg, stdout);
		config_free(&cfg);
		return 0;
	}
	log_set_max_level(cfg.log_level);
	bpfgate_route_libbpf_log();
	fault_init();
	r = daemon_setup(&d, &err);
	if (r < 0) {
		log_error("%s", err.message[0] ? err.message : strerror(-r));
		if (err.hint[0])
			log_error("hint: %s", err.hint);
		daemon_teardown(&d);
		return dg_code_info(err.code ? err.code : DG_E_INTERNAL)->exit_code;
	}
	r = run(&d);
	daemon_teardown(&d);
	return r < 0 ? 1 : 0;
}
