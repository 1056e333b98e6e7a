// SPDX-License-Identifier: Apache-2.0
/* devgate.conf: parsing, validation, error positions, precedence. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include "cleanup.h"
#include "core/config.h"
#include "sys/confine.h"
#include "core/daemon.h"
#include "lease/hostdev.h"
#include "server/peer.h"
#include "lease/policy.h"

static int setup(void **state)
{
	struct dg_config *c = calloc(1, sizeof(*c));

	if (!c || config_init(c) < 0)
		return -1;
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	config_free(*state);
	free(*state);
	return 0;
}

static void test_defaults(void **state)
{
	struct dg_config *c = *state;

	assert_string_equal(c->socket_path, "/run/devgate/devgated.sock");
	assert_string_equal(c->state_dir, "/run/devgate/state");
	assert_string_equal(c->pin_root, "/sys/fs/bpf/devgate");
	assert_string_equal(c->host_root, "/");
	assert_null(c->metrics_listen);
	assert_int_equal(c->node_mode, 0666);
	assert_int_equal(c->recheck_ms, 1000);
	assert_false(c->hook_env);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_int_equal(c->seccomp, DG_SECCOMP_ON);
	assert_true(c->gate_beside);
}

/* The socket's access and limits: groups by name or number, counts in range. */
static void test_access_keys(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };

	assert_int_equal(c->max_clients, 256);
	assert_int_equal(c->client_timeout_ms, 5000);
	assert_true(c->socket_gid == DG_NO_GID && c->admin_gid == DG_NO_GID);
	assert_int_equal(config_set(c, "socket-group", "4242", &err), 0);
	assert_int_equal(c->socket_gid, 4242);
	assert_int_equal(config_set(c, "admin-group", "root", &err), 0);
	assert_int_equal(c->admin_gid, 0);
	assert_int_equal(config_set(c, "socket-group", "", &err), 0);
	assert_true(c->socket_gid == DG_NO_GID);
	assert_true(config_set(c, "admin-group", "no-such-group-here", &err) < 0);
	assert_int_equal(c->admin_gid, 0);
	assert_true(config_set(c, "max-clients", "0", &err) < 0);
	assert_true(config_set(c, "max-clients", "65537", &err) < 0);
	assert_int_equal(config_set(c, "max-clients", "16", &err), 0);
	assert_int_equal(c->max_clients, 16);
	assert_int_equal(config_set(c, "client-timeout-ms", "250", &err), 0);
	assert_int_equal(c->client_timeout_ms, 250);
	/* recheck-ms shares the type; it must not write the timeout. */
	assert_int_equal(config_set(c, "recheck-ms", "300", &err), 0);
	assert_int_equal(c->client_timeout_ms, 250);
	assert_int_equal(c->recheck_ms, 300);
}

static void test_peer_groups(void **state)
{
	const gid_t groups[] = { 10, 4242 };

	(void)state;
	assert_true(peer_in_group(4242, 100, groups, 2));
	assert_true(peer_in_group(100, 100, NULL, 0));
	assert_false(peer_in_group(4343, 100, groups, 2));
	assert_false(peer_in_group(DG_NO_GID, DG_NO_GID, NULL, 0));
}

static void test_good_file(void **state)
{
	static const char text[] = "# devgate.conf\n"
				   "\n"
				   "socket = /run/dg/s.sock\n"
				   "  state-dir=/var/lib/dg   \n"
				   "\tpin-root =\t/sys/fs/bpf/dg # trailing comment\n"
				   "host-root = /srv/fixture#not-a-comment\n"
				   "node-mode = 0660\n"
				   "node-owner = 0:44\n"
				   "recheck-ms = 250\n"
				   "metrics-listen = [::1]:9400\n"
				   "hook-allow-env = yes\n"
				   "seccomp = log\n"
				   "gate-mode = replace\n"
				   "log-level = debug"; /* no final newline */
	struct dg_config *c = *state;
	struct dg_error err = { 0 };

	assert_int_equal(config_parse(c, "t.conf", text, &err), 0);
	assert_string_equal(c->socket_path, "/run/dg/s.sock");
	assert_string_equal(c->state_dir, "/var/lib/dg");
	assert_string_equal(c->pin_root, "/sys/fs/bpf/dg");
	assert_string_equal(c->host_root, "/srv/fixture#not-a-comment");
	assert_int_equal(c->node_mode, 0660);
	assert_int_equal(c->node_uid, 0);
	assert_int_equal(c->node_gid, 44);
	assert_int_equal(c->recheck_ms, 250);
	assert_string_equal(c->metrics_listen, "[::1]:9400");
	assert_true(c->hook_env);
	assert_int_equal(c->seccomp, DG_SECCOMP_LOG);
	assert_false(c->gate_beside);
	assert_int_equal(c->log_level, LOG_DEBUG);
}

static void expect_error(struct dg_config *c, const char *text, const char *message)
{
	struct dg_error err = { 0 };

	assert_true(config_parse(c, "t.conf", text, &err) < 0);
	assert_int_equal(err.code, DG_E_CONFIG);
	assert_int_equal(dg_code_info(err.code)->exit_code, 14);
	assert_string_equal(err.message, message);
}

static void test_errors_name_file_and_line(void **state)
{
	struct dg_config *c = *state;

	expect_error(c, "# ok\nfrobnicate = 1\n", "t.conf:2: unknown key 'frobnicate'");
	expect_error(c, "socket /run/x\n", "t.conf:1: expected 'key = value'");
	expect_error(c, "\n\nsocket = run/x\n",
		     "t.conf:3: socket: 'run/x' is not an absolute path");
	expect_error(c, "node-mode = 0999\n",
		     "t.conf:1: node-mode: '0999' is not an octal mode "
		     "up to 0777");
	expect_error(c, "node-mode = 4755\n",
		     "t.conf:1: node-mode: '4755' is not an octal mode "
		     "up to 0777");
	expect_error(c, "node-owner = root\n", "t.conf:1: node-owner: 'root' is not UID:GID");
	expect_error(c, "recheck-ms = 99\n",
		     "t.conf:1: recheck-ms: '99' is not a number of "
		     "milliseconds from 100 to 3600000");
	expect_error(c, "recheck-ms = 1s\n",
		     "t.conf:1: recheck-ms: '1s' is not a number of "
		     "milliseconds from 100 to 3600000");
	expect_error(c, "hook-allow-env = maybe\n",
		     "t.conf:1: hook-allow-env: 'maybe' is not a "
		     "boolean (true or false)");
	expect_error(c, "seccomp = strict\n",
		     "t.conf:1: seccomp: 'strict' is not a seccomp mode (on, log, off)");
	expect_error(c, "gate-mode = after\n",
		     "t.conf:1: gate-mode: 'after' is not a gate mode (beside, replace)");
	expect_error(c, "log-level = loud\n",
		     "t.conf:1: log-level: 'loud' is not a log level "
		     "(error, warning, notice, info, debug)");
	expect_error(c, "metrics-listen = 9400\n",
		     "t.conf:1: metrics-listen: '9400' is not "
		     "ADDR:PORT (a numeric address, port 1 to 65535)");
	expect_error(c, "metrics-listen = 0.0.0.0:70000\n",
		     "t.conf:1: metrics-listen: "
		     "'0.0.0.0:70000' is not ADDR:PORT "
		     "(a numeric address, port 1 to 65535)");
	expect_error(c, "metrics-listen = localhost:9400\n",
		     "t.conf:1: metrics-listen: "
		     "'localhost:9400' is not ADDR:PORT "
		     "(a numeric address, port 1 to 65535)");
	expect_error(c, "host-root =\n", "t.conf:1: host-root: a path is needed");
	expect_error(c, "socket = /a\nsocket = /b\n", "t.conf:2: 'socket' is set twice");
}

static void test_empty_and_off(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };

	assert_int_equal(config_parse(c, "t.conf", "", &err), 0);
	assert_int_equal(config_parse(c, "t.conf", "\n  \n# only comments\n", &err), 0);
	assert_int_equal(config_parse(c, "t.conf", "metrics-listen = 127.0.0.1:9400\n", &err), 0);
	assert_string_equal(c->metrics_listen, "127.0.0.1:9400");
	assert_int_equal(
		config_parse(c, "t.conf", "metrics-listen =\nhook-allow-env = off\n", &err), 0);
	assert_null(c->metrics_listen);
	assert_false(c->hook_env);
}

/* The command line (config_set after the file) wins; the file beats defaults. */
static void test_override_order(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };

	assert_int_equal(config_parse(c, "t.conf", "socket = /file.sock\nrecheck-ms = 500\n", &err),
			 0);
	assert_int_equal(config_set(c, "socket", "/cli.sock", &err), 0);
	assert_string_equal(c->socket_path, "/cli.sock");
	assert_int_equal(c->recheck_ms, 500);
	assert_string_equal(c->state_dir, "/run/devgate/state");
	assert_true(config_set(c, "recheck-ms", "0", &err) < 0);
	assert_int_equal(err.code, DG_E_INVALID);
	assert_int_equal(c->recheck_ms, 500);
	assert_true(config_set(c, "no-such-key", "1", &err) < 0);
	assert_false(config_key_known("no-such-key"));
	assert_true(config_key_known("pin-root"));
}

static void test_load(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };
	char path[] = "/tmp/devgate-config.XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "node-mode = 0600\n", 17), 17);
	close(fd);
	assert_int_equal(config_load(c, path, true, &err), 0);
	assert_int_equal(c->node_mode, 0600);
	unlink(path);
	assert_int_equal(config_load(c, path, false, &err), 0);
	assert_true(config_load(c, path, true, &err) < 0);
	assert_int_equal(err.code, DG_E_CONFIG);
	assert_non_null(strstr(err.message, "No such file or directory"));
}

/* Only a file root alone can change is read; a FIFO is refused unopened. */
static void test_load_untrusted(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };
	char dir[] = "/tmp/devgate-config.XXXXXX", path[64];
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	/* Would block in open() if it were opened. */
	assert_true(config_load(c, path, true, &err) < 0);
	assert_int_equal(err.code, DG_E_CONFIG);
	assert_non_null(strstr(err.message, "is a FIFO, not a regular file"));
	assert_non_null(strstr(err.hint, "only root can change"));
	unlink(path);
	snprintf(path, sizeof(path), "%s/c.conf", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "node-mode = 0640\n", 17), 17);
	assert_int_equal(fchmod(fd, 0622), 0);
	close(fd);
	assert_true(config_load(c, path, false, &err) < 0);
	assert_non_null(strstr(err.message, "is writable by its group or others (mode 0622)"));
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(config_load(c, path, true, &err), 0);
	assert_int_equal(c->node_mode, 0640);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_true(config_load(c, path, true, &err) < 0);
	assert_non_null(strstr(err.message, "the directory"));
	assert_int_equal(chmod(dir, 01777), 0);
	assert_int_equal(config_load(c, path, true, &err), 0);
	assert_int_equal(config_load(c, "/dev/null", true, &err), 0);
	unlink(path);
	rmdir(dir);
}

/* What --check-config prints is a valid file that reproduces the settings. */
/* gpu-allow, alias and profile lines: parsed, checked, errors at FILE:LINE. */
static void test_policy(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };
	struct policy_request req = { 0 };

	assert_int_equal(config_parse(c, "p.conf",
				      "gpu-allow = 10de:2330, 10DE:20b0\n"
				      "alias h100 = 10de:2330\n"
				      "alias  a100-40 = 10de:20b0 # the small ones\n"
				      "profile big = gpus=2 arch=Hopper min-memory=80G\n"
				      "profile one = alias=a100-40 shared=true min-cc=8.0\n",
				      &err),
			 0);
	assert_int_equal(c->policy.n_allow, 2);
	assert_int_equal(c->policy.allow[1], 0x10de20b0);
	assert_int_equal(c->policy.n_aliases, 2);
	assert_string_equal(c->policy.aliases[1].name, "a100-40");
	assert_int_equal(c->policy.n_profiles, 2);
	assert_int_equal(c->policy.profiles[0].count, 2);
	assert_int_equal(policy_resolve(&c->policy, "one", NULL, &req, &err), 0);
	assert_int_equal(req.count, 1);
	assert_true(req.shared);
	assert_string_equal(req.product, "10de:20b0");
	assert_string_equal(req.min_cc, "8.0");
	/* What the request says itself wins over its profile. */
	req = (struct policy_request){ .arch = "ampere", .count = 3, .has_count = true };
	assert_int_equal(policy_resolve(&c->policy, "big", NULL, &req, &err), 0);
	assert_string_equal(req.arch, "ampere");
	assert_int_equal(req.count, 3);
	assert_string_equal(req.min_memory, "80G");
	req = (struct policy_request){ 0 };
	assert_int_equal(policy_resolve(&c->policy, NULL, "h100", &req, &err), 0);
	assert_string_equal(req.product, "10de:2330");
	assert_int_equal(req.count, 1);
	req = (struct policy_request){ .product = "10de:20b0" };
	assert_int_equal(policy_resolve(&c->policy, NULL, "h100", &req, &err), -EINVAL);
	assert_int_equal(policy_resolve(&c->policy, "nope", NULL, &req, &err), -ENOENT);
	assert_non_null(strstr(err.message, "no profile 'nope'"));
	assert_int_equal(policy_resolve(&c->policy, NULL, "nope", &req, &err), -ENOENT);
	assert_non_null(strstr(err.hint, "h100"));
}

static void expect_policy_error(const char *text, const char *where, const char *what)
{
	struct dg_config c;
	struct dg_error err = { 0 };

	assert_int_equal(config_init(&c), 0);
	assert_true(config_parse(&c, "p.conf", text, &err) < 0);
	assert_int_equal(err.code, DG_E_CONFIG);
	if (!strstr(err.message, where) || !strstr(err.message, what))
		fail_msg("'%s' lacks '%s' or '%s'", err.message, where, what);
	config_free(&c);
}

static void test_policy_errors(void **state)
{
	(void)state;
	expect_policy_error("gpu-allow = 10de:2330,\n", "p.conf:1:", "'' is not VENDOR:DEVICE");
	expect_policy_error("\ngpu-allow = 10de-2330\n", "p.conf:2:", "not VENDOR:DEVICE");
	expect_policy_error("alias x = 10de:23\n", "p.conf:1:", "is not VENDOR:PRODUCT");
	expect_policy_error("alias x = 10de:2330\nalias x = 10de:2330\n",
			    "p.conf:2:", "defined twice");
	expect_policy_error("alias a/b = 10de:2330\n", "p.conf:1:", "is not a name");
	expect_policy_error("alias = 10de:2330\n", "p.conf:1:", "unknown key 'alias'");
	expect_policy_error("profile p = gpus=0\n", "p.conf:1:", "not a count");
	expect_policy_error("profile p = arch=tesla\n", "p.conf:1:", "unknown architecture");
	expect_policy_error("profile p = colour=red\n", "p.conf:1:", "unknown profile key");
	expect_policy_error("profile p = gpus\n", "p.conf:1:", "not KEY=VALUE");
	expect_policy_error("profile p = gpus=1 gpus=2\n", "p.conf:1:", "given twice");
	expect_policy_error("profile p = alias=later\nalias later = 10de:2330\n",
			    "p.conf:1:", "not defined above");
	expect_policy_error("profile p = min-memory=40\n", "p.conf:1:", "not a size");
	expect_policy_error("profile p = min-cc=high\n", "p.conf:1:", "not a compute");
	expect_policy_error("profile p =\n", "p.conf:1:", "empty profile");
	expect_policy_error("alias h = 10de:2330\nprofile p = alias=h product=10de:2330\n",
			    "p.conf:2:", "not both");
}

static void test_print_round_trip(void **state)
{
	struct dg_config *c = *state, again;
	struct dg_error err = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(config_parse(c, "t.conf",
				      "node-owner = 7:8\nhook-allow-env = true\n"
				      "metrics-listen = 127.0.0.1:9400\nseccomp = off\n"
				      "gate-mode = replace\n"
				      "gpu-allow = 10de:2330\nalias h = 10de:2330\n"
				      "profile p = gpus=2 alias=h shared=true\n",
				      &err),
			 0);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	config_print(c, f);
	fclose(f);
	assert_int_equal(config_init(&again), 0);
	assert_int_equal(config_parse(&again, "printed", text, &err), 0);
	assert_int_equal(again.node_uid, 7);
	assert_int_equal(again.node_gid, 8);
	assert_true(again.hook_env);
	assert_int_equal(again.seccomp, DG_SECCOMP_OFF);
	assert_false(again.gate_beside);
	assert_string_equal(again.metrics_listen, "127.0.0.1:9400");
	assert_string_equal(again.socket_path, c->socket_path);
	assert_int_equal(again.policy.n_allow, 1);
	assert_int_equal(again.policy.n_aliases, 1);
	assert_int_equal(again.policy.n_profiles, 1);
	assert_true(again.policy.profiles[0].shared);
	assert_string_equal(again.policy.profiles[0].alias, "h");
	config_free(&again);
	free(text);
}

/* device-allow: paths, numbers and MAJOR:*, printed back as given; bad items refused whole. */
static void test_device_allow(void **state)
{
	struct dg_config *c = *state;
	struct dg_error err = { 0 };
	char text[512];

	assert_int_equal(config_set(c, "device-allow", "/dev/mem, 21:*,1:4", &err), 0);
	assert_int_equal(c->device_allow.n, 3);
	hostdev_allow_text(&c->device_allow, text, sizeof(text));
	assert_string_equal(text, "/dev/mem, 21:*, 1:4");
	/* b: numbers are a block device's, and print back as such. */
	assert_int_equal(config_set(c, "device-allow", "b:7:*, b:8:1, 7:0", &err), 0);
	assert_true(c->device_allow.e[0].block);
	assert_false(c->device_allow.e[2].block);
	hostdev_allow_text(&c->device_allow, text, sizeof(text));
	assert_string_equal(text, "b:7:*, b:8:1, 7:0");
	assert_int_equal(config_set(c, "device-allow", "b:/dev/sda", &err), -EINVAL);
	assert_non_null(strstr(err.message, "'b:/dev/sda' is not a device"));
	assert_int_equal(config_set(c, "device-allow", "/dev/mem, 21:*,1:4", &err), 0);
	assert_int_equal(config_set(c, "device-allow", "21:x", &err), -EINVAL);
	assert_non_null(strstr(err.message, "'21:x' is not a device"));
	assert_int_equal(config_set(c, "device-allow", "-1:2", &err), -EINVAL);
	assert_int_equal(config_set(c, "device-allow", "5000:1", &err), -EINVAL);
	assert_int_equal(config_set(c, "device-allow", "dev/mem", &err), -EINVAL);
	/* A refused value leaves the list as it was. */
	assert_int_equal(c->device_allow.n, 3);
	assert_int_equal(config_set(c, "device-allow", "", &err), 0);
	assert_int_equal(c->device_allow.n, 0);
}

/* A reload takes the policy alone, and names the other keys that changed. */
static void test_take_policy(void **state)
{
	struct dg_config *c = *state, next;
	struct dg_error err = { 0 };
	char restart[256];

	assert_int_equal(config_init(&next), 0);
	assert_int_equal(
		config_parse(&next, "n.conf",
			     "gpu-allow = 10de:2330\nalias h = 10de:2330\n"
			     "device-allow = b:7:*\nrecheck-ms = 700\nstate-dir = /srv/x\n",
			     &err),
		0);
	config_take_policy(c, &next, restart, sizeof(restart));
	assert_string_equal(restart, "state-dir, recheck-ms");
	assert_int_equal(c->policy.n_allow, 1);
	assert_int_equal(c->policy.n_aliases, 1);
	assert_int_equal(c->device_allow.n, 1);
	assert_int_equal(c->recheck_ms, 1000);
	assert_string_equal(c->state_dir, "/run/devgate/state");
	/* The policy moved: freeing what is left of next frees it once. */
	assert_null(next.policy.aliases);
	config_free(&next);
	assert_string_equal(c->policy.aliases[0].name, "h");
}

/* What reaches past a container, by fixed major and by /proc/devices's name. */
static void test_breakout(void **state)
{
	static const char procdev[] = "Character devices:\n  1 mem\n 10 misc\n240 nvme-generic\n"
				      "241 bsg\n\nBlock devices:\n242 sg\n";
	static const char dynamic[] = "Character devices:\n  5 /dev/tty\n  5 /dev/console\n"
				      "243 hidraw\n244 dax\n245 ipmidev\n";

	(void)state;
	assert_non_null(hostdev_breakout(makedev(1, 1), NULL));
	assert_non_null(hostdev_breakout(makedev(1, 4), procdev));
	assert_null(hostdev_breakout(makedev(1, 3), procdev)); /* /dev/null */
	assert_null(hostdev_breakout(makedev(1, 7), procdev)); /* /dev/full */
	assert_non_null(hostdev_breakout(makedev(10, 236), procdev));
	assert_non_null(hostdev_breakout(makedev(10, 237), procdev)); /* loop-control */
	assert_non_null(hostdev_breakout(makedev(1, 11), NULL));      /* kmsg */
	assert_non_null(hostdev_breakout(makedev(4, 0), NULL));	      /* tty0 */
	assert_non_null(hostdev_breakout(makedev(5, 1), NULL));	      /* console */
	assert_non_null(hostdev_breakout(makedev(7, 0), NULL));	      /* vcs */
	assert_non_null(hostdev_breakout(makedev(13, 64), NULL));     /* input/event0 */
	assert_non_null(hostdev_breakout(makedev(189, 0), NULL));     /* usb */
	assert_non_null(hostdev_breakout(makedev(21, 9), NULL));
	assert_non_null(hostdev_breakout(makedev(202, 3), NULL));
	assert_non_null(hostdev_breakout(makedev(240, 0), procdev));
	assert_non_null(hostdev_breakout(makedev(241, 5), procdev));
	/* A block major of the same number is not a character device's name. */
	assert_null(hostdev_breakout(makedev(242, 0), procdev));
	assert_null(hostdev_breakout(makedev(240, 0), NULL));
	/* A name /proc/devices gives a dynamic major, whichever major it got. */
	assert_string_equal(
		hostdev_breakout(makedev(243, 1), dynamic),
		"raw access to the host's keyboards and other HID devices (/dev/hidraw*)");
	assert_non_null(hostdev_breakout(makedev(244, 0), dynamic));
	assert_non_null(hostdev_breakout(makedev(245, 0), dynamic));
	/* Major 5's second name. */
	assert_non_null(hostdev_breakout(makedev(5, 1), dynamic));
	assert_null(hostdev_breakout(makedev(5, 0), dynamic));
}

/* Only the devices any container may have are safe, by their numbers alone. */
static void test_safe(void **state)
{
	static const unsigned int safe[][2] = { { 1, 3 }, { 1, 5 },    { 1, 7 },
						{ 1, 8 }, { 1, 9 },    { 5, 0 },
						{ 5, 2 }, { 10, 200 }, { 10, 229 } };
	static const unsigned int not_safe[][2] = {
		{ 1, 1 },   { 1, 2 },	{ 1, 4 },    { 1, 11 },	  { 4, 0 },    { 4, 1 },
		{ 5, 1 },   { 7, 0 },	{ 10, 237 }, { 10, 223 }, { 10, 130 }, { 13, 64 },
		{ 189, 0 }, { 136, 0 }, { 3, 9 },    { 10, 228 }, { 0, 3 },    { 240, 0 }
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(safe); i++)
		assert_non_null(hostdev_safe(makedev(safe[i][0], safe[i][1])));
	for (size_t i = 0; i < ARRAY_SIZE(not_safe); i++)
		assert_null(hostdev_safe(makedev(not_safe[i][0], not_safe[i][1])));
	assert_string_equal(hostdev_safe(makedev(10, 229)), "/dev/fuse");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_good_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_access_keys, setup, teardown),
		cmocka_unit_test(test_peer_groups),
		cmocka_unit_test_setup_teardown(test_errors_name_file_and_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_and_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_override_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_policy, setup, teardown),
		cmocka_unit_test(test_policy_errors),
		cmocka_unit_test_setup_teardown(test_device_allow, setup, teardown),
		cmocka_unit_test(test_breakout),
		cmocka_unit_test_setup_teardown(test_load_untrusted, setup, teardown),
		cmocka_unit_test(test_safe),
		cmocka_unit_test_setup_teardown(test_take_policy, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
