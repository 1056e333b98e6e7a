// SPDX-License-Identifier: Apache-2.0
/*
 * devgated's settings: the built-in defaults, then devgate.conf, then the
 * command line, each key checked by one setter whichever way it came (see
 * config.h). It parses and stores; it opens no socket, loads nothing and
 * changes nothing on the host. It reads the file only when root alone could
 * have written it (open_trusted), and never opens one that could block. A
 * reload builds a new configuration here and moves only the policy over.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "config.h"
#include "sys/confine.h"
#include "log.h"
#include "sys/listen_addr.h"
#include "lease/policy.h"
#include "paths.h"
#include "protocol.h"
#include "util.h"

#define CONFIG_MAX ((size_t)64 * 1024)
#define LINE_MAX_LEN 4096

enum key_type {
	K_ABSPATH,  /* char *, absolute path */
	K_PATH,	    /* char *, any non-empty path */
	K_LISTEN,   /* char *, ADDR:PORT, empty for none */
	K_OPTPATH,  /* char *, absolute path, empty for none */
	K_MODE,	    /* mode_t, octal up to 0777 */
	K_OWNER,    /* node_uid and node_gid */
	K_MS,	    /* unsigned int, 100 to 3600000 */
	K_COUNT,    /* unsigned int, 1 to 65536 */
	K_HEAL_MS,  /* unsigned int, 0 (off) to 1000 */
	K_GROUP,    /* gid_t, a group name or number; empty for none */
	K_BOOL,	    /* bool */
	K_LEVEL,    /* int, syslog level */
	K_SECCOMP,  /* int, enum dg_seccomp_mode */
	K_ALLOW,    /* struct dg_policy's gpu-allow list */
	K_DEVALLOW, /* struct hostdev_allow */
	K_GATE,	    /* bool gate_beside: beside or replace */
};

struct key {
	const char *name;
	enum key_type type;
	size_t off;
};

#define KEY(n, t, field)                                \
	{                                               \
		n, t, offsetof(struct dg_config, field) \
	}

/* Keys are named like devgated's long options; man devgate.conf(5) lists them. */
static const struct key keys[] = {
	KEY("socket", K_ABSPATH, socket_path),
	KEY("state-dir", K_ABSPATH, state_dir),
	KEY("pin-root", K_ABSPATH, pin_root),
	KEY("host-root", K_PATH, host_root),
	KEY("cgroup-root", K_OPTPATH, cgroup_root),
	KEY("docker-socket", K_OPTPATH, docker_socket),
	KEY("podman-storage", K_OPTPATH, podman_storage),
	KEY("lxd-socket", K_OPTPATH, lxd_socket),
	KEY("runc-root", K_OPTPATH, runc_root),
	KEY("lxc-path", K_OPTPATH, lxc_path),
	KEY("cri-runc-root", K_OPTPATH, cri_root),
	KEY("node-mode", K_MODE, node_mode),
	KEY("node-owner", K_OWNER, node_uid),
	KEY("recheck-ms", K_MS, recheck_ms),
	KEY("heal-ms", K_HEAL_MS, heal_ms),
	KEY("max-clients", K_COUNT, max_clients),
	KEY("max-clients-per-uid", K_COUNT, clients_per_uid),
	KEY("max-streams-per-uid", K_COUNT, streams_per_uid),
	KEY("reserved-clients", K_COUNT, reserved_clients),
	KEY("client-timeout-ms", K_MS, client_timeout_ms),
	KEY("socket-group", K_GROUP, socket_gid),
	KEY("admin-group", K_GROUP, admin_gid),
	KEY("metrics-listen", K_LISTEN, metrics_listen),
	KEY("hook-allow-env", K_BOOL, hook_env),
	KEY("attach-events", K_BOOL, attach_events),
	KEY("log-level", K_LEVEL, log_level),
	KEY("seccomp", K_SECCOMP, seccomp),
	KEY("gpu-allow", K_ALLOW, policy),
	KEY("device-allow", K_DEVALLOW, device_allow),
	KEY("gate-mode", K_GATE, gate_beside),
};

static const char *const level_names[] = {
	[LOG_ERR] = "error", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

static const struct key *key_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	}
	return NULL;
}

bool config_key_known(const char *key)
{
	return key_find(key) != NULL;
}

static void *field(struct dg_config *c, const struct key *k)
{
	return (char *)c + k->off;
}

static const void *cfield(const struct dg_config *c, const struct key *k)
{
	return (const char *)c + k->off;
}

/* Parses a group name or number into *ret; an empty value means no group. */
static int parse_group(const char *v, gid_t *ret)
{
	struct group *g;
	uint32_t n;

	if (!*v) {
		*ret = DG_NO_GID;
		return 0;
	}
	if (parse_u32(v, &n) == 0 && n != (uint32_t)DG_NO_GID) {
		*ret = n;
		return 0;
	}
	g = getgrnam(v);
	if (!g)
		return -ENOENT;
	*ret = g->gr_gid;
	return 0;
}

static void print_group(gid_t gid, FILE *f)
{
	struct group *g = gid == DG_NO_GID ? NULL : getgrgid(gid);

	if (gid == DG_NO_GID)
		fprintf(f, "\n");
	else if (g)
		fprintf(f, "%s\n", g->gr_name);
	else
		fprintf(f, "%u\n", (unsigned int)gid);
}

static int set_str(char **dst, const char *v)
{
	char *copy = NULL;

	if (v) {
		copy = strdup(v);
		if (!copy)
			return -ENOMEM;
	}
	free(*dst);
	*dst = copy;
	return 0;
}

int config_init(struct dg_config *c)
{
	memset(c, 0, sizeof(*c));
	c->node_mode = 0666;
	c->recheck_ms = 1000;
	c->attach_events = true;
	c->heal_ms = 10;
	c->gate_beside = true; /* the runtime's own device changes keep working */
	c->max_clients = 256;
	c->clients_per_uid = 32;
	c->streams_per_uid = 8;
	c->reserved_clients = 64;
	c->client_timeout_ms = 5000;
	c->socket_gid = DG_NO_GID;
	c->admin_gid = DG_NO_GID;
	c->log_level = LOG_INFO;
	if (set_str(&c->socket_path, DG_DEFAULT_SOCKET) < 0 ||
	    set_str(&c->state_dir, DG_DEFAULT_STATE_DIR) < 0 ||
	    set_str(&c->pin_root, DG_DEFAULT_PIN_ROOT) < 0 || set_str(&c->host_root, "/") < 0 ||
	    set_str(&c->docker_socket, "/var/run/docker.sock") < 0 ||
	    set_str(&c->podman_storage, "/var/lib/containers/storage") < 0 ||
	    set_str(&c->lxd_socket, "/var/lib/lxd/unix.socket") < 0 ||
	    set_str(&c->runc_root, "/run/runc") < 0 || set_str(&c->lxc_path, "/var/lib/lxc") < 0 ||
	    set_str(&c->cri_root, "/run/containerd/runc/k8s.io") < 0) {
		config_free(c);
		return -ENOMEM;
	}
	return 0;
}

void config_free(struct dg_config *c)
{
	free(c->cgroup_root);
	free(c->socket_path);
	free(c->state_dir);
	free(c->pin_root);
	free(c->host_root);
	free(c->metrics_listen);
	free(c->docker_socket);
	free(c->podman_storage);
	free(c->lxd_socket);
	free(c->runc_root);
	free(c->lxc_path);
	free(c->cri_root);
	c->docker_socket = c->podman_storage = c->lxd_socket = c->runc_root = NULL;
	c->lxc_path = c->cri_root = NULL;
	policy_free(&c->policy);
	c->socket_path = c->state_dir = c->pin_root = c->host_root = c->metrics_listen = NULL;
	c->cgroup_root = NULL;
}

static int parse_owner(const char *s, uid_t *uid, gid_t *gid)
{
	char buf[64];
	char *colon;
	uint32_t u, g;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	if (parse_u32(buf, &u) < 0 || parse_u32(colon + 1, &g) < 0)
		return -EINVAL;
	*uid = u;
	*gid = g;
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
			*ret = strcasecmp(s, yes[i]) == 0;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_level(const char *s, int *ret)
{
	for (int l = 0; l < (int)ARRAY_SIZE(level_names); l++) {
		if (level_names[l] && strcmp(s, level_names[l]) == 0) {
			*ret = l;
			return 0;
		}
	}
	return -EINVAL;
}

/* Checks an ADDR:PORT with the metrics listener's own parser, so it fails here, not at start. */
static int check_listen(const char *s)
{
	struct sockaddr_storage ss;
	socklen_t len;

	return listen_addr_parse(s, &ss, &len);
}

static int set_value(struct dg_config *c, const struct key *k, const char *v, struct dg_error *err)
{
	uint32_t ms;
	mode_t mode;

	switch (k->type) {
	case K_ABSPATH:
		if (v[0] != '/')
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not an absolute path", v);
		return set_str(field(c, k), v);
	case K_PATH:
		if (!*v)
			return dg_error_set(err, DG_E_INVALID, EINVAL, "a path is needed");
		return set_str(field(c, k), v);
	case K_OPTPATH:
		if (*v && v[0] != '/')
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not an absolute path", v);
		return set_str(field(c, k), *v ? v : NULL);
	case K_LISTEN:
		if (*v && check_listen(v) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not ADDR:PORT (a numeric address, "
					    "port 1 to 65535)",
					    v);
		return set_str(field(c, k), *v ? v : NULL);
	case K_MODE:
		if (parse_mode(v, &mode) < 0 || mode > 0777)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not an octal mode up to 0777", v);
		c->node_mode = mode;
		return 0;
	case K_OWNER:
		if (parse_owner(v, &c->node_uid, &c->node_gid) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL, "'%s' is not UID:GID", v);
		return 0;
	case K_MS:
		if (parse_u32(v, &ms) < 0 || ms < 100 || ms > 3600000)
			return dg_error_set(
				err, DG_E_INVALID, EINVAL,
				"'%s' is not a number of milliseconds from 100 to 3600000", v);
		*(unsigned int *)field(c, k) = ms;
		return 0;
	case K_HEAL_MS:
		if (parse_u32(v, &ms) < 0 || ms > 1000)
			return dg_error_set(
				err, DG_E_INVALID, EINVAL,
				"'%s' is not a number of milliseconds from 0 (off) to 1000", v);
		*(unsigned int *)field(c, k) = ms;
		return 0;
	case K_COUNT:
		if (parse_u32(v, &ms) < 0 || ms < 1 || ms > 65536)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not a number from 1 to 65536", v);
		*(unsigned int *)field(c, k) = ms;
		return 0;
	case K_GROUP:
		if (parse_group(v, field(c, k)) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not a group on this host (name or GID)", v);
		return 0;
	case K_BOOL:
		if (parse_bool(v, field(c, k)) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not a boolean (true or false)", v);
		return 0;
	case K_LEVEL:
		if (parse_level(v, field(c, k)) < 0)
			return dg_error_set(
				err, DG_E_INVALID, EINVAL,
				"'%s' is not a log level (error, warning, notice, info, "
				"debug)",
				v);
		return 0;
	case K_SECCOMP:
		if (confine_mode_parse(v, field(c, k)) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not a seccomp mode (on, log, off)", v);
		return 0;
	case K_ALLOW:
		return policy_set_allow(&c->policy, v, err);
	case K_DEVALLOW:
		return hostdev_set_allow(&c->device_allow, v, err);
	case K_GATE:
		if (strcmp(v, "beside") != 0 && strcmp(v, "replace") != 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not a gate mode (beside, replace)", v);
		c->gate_beside = strcmp(v, "beside") == 0;
		return 0;
	}
	return -EINVAL;
}

int config_set(struct dg_config *c, const char *key, const char *value, struct dg_error *err)
{
	const struct key *k = key_find(key);
	int r;

	if (!k)
		return dg_error_set(err, DG_E_INVALID, ENOENT, "unknown key");
	r = set_value(c, k, value, err);
	if (r == -ENOMEM)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return r;
}

/* Ends the line at a comment: a '#' at its start or after white space. */
static void strip_comment(char *line)
{
	for (char *p = line; *p; p++) {
		if (*p == '#' && (p == line || isspace((unsigned char)p[-1]))) {
			*p = '\0';
			return;
		}
	}
}

/*
 * Handles "alias NAME = V" and "profile NAME = V", which name entries
 * rather than set a key. Returns false when key is neither.
 */
static bool policy_line(struct dg_config *c, const char *key, const char *value, int *r,
			struct dg_error *err)
{
	struct dg_error e = { 0 };
	const char *name;

	if (startswith(key, "alias") && isspace((unsigned char)key[5])) {
		name = key + 5;
		while (isspace((unsigned char)*name))
			name++;
		*r = policy_add_alias(&c->policy, name, value, &e);
	} else if (startswith(key, "profile") && isspace((unsigned char)key[7])) {
		name = key + 7;
		while (isspace((unsigned char)*name))
			name++;
		*r = policy_add_profile(&c->policy, name, value, &e);
	} else {
		return false;
	}
	if (*r < 0) {
		dg_error_set(err, e.code == DG_E_INVALID ? DG_E_CONFIG : e.code, *r, "%s",
			     e.message);
		if (e.hint[0])
			dg_error_hint(err, "%s", e.hint);
	}
	return true;
}

static int parse_line(struct dg_config *c, char *line, unsigned int *seen, struct dg_error *err)
{
	struct dg_error e = { 0 };
	char *eq, *key, *value;
	const struct key *k;
	int r;

	strip_comment(line);
	if (!*strstrip(line))
		return 0;
	eq = strchr(line, '=');
	if (!eq)
		return dg_error_set(err, DG_E_CONFIG, EINVAL, "expected 'key = value'");
	*eq = '\0';
	key = strstrip(line);
	value = strstrip(eq + 1);
	if (policy_line(c, key, value, &r, err))
		return r;
	k = key_find(key);
	if (!k)
		return dg_error_set(err, DG_E_CONFIG, ENOENT, "unknown key '%s'", key);
	if (*seen & (1u << (k - keys)))
		return dg_error_set(err, DG_E_CONFIG, EEXIST, "'%s' is set twice", key);
	*seen |= 1u << (k - keys);
	r = config_set(c, key, value, &e);
	if (r < 0) {
		dg_error_set(err, e.code == DG_E_INVALID ? DG_E_CONFIG : e.code, r, "%s: %s", key,
			     e.message);
		if (e.hint[0])
			dg_error_hint(err, "%s", e.hint);
	}
	return r < 0 ? r : 0;
}

int config_parse(struct dg_config *c, const char *name, const char *text, struct dg_error *err)
{
	unsigned int seen = 0, lineno = 0;
	const char *p = text;

	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		struct dg_error e = { 0 };
		char line[LINE_MAX_LEN];
		int r;

		lineno++;
		if (len >= sizeof(line))
			return dg_error_set(err, DG_E_CONFIG, E2BIG, "%s:%u: line too long", name,
					    lineno);
		memcpy(line, p, len);
		line[len] = '\0';
		r = parse_line(c, line, &seen, &e);
		if (r < 0) {
			dg_error_set(err, e.code, r, "%s:%u: %s", name, lineno, e.message);
			if (e.hint[0])
				dg_error_hint(err, "%s", e.hint);
			return r;
		}
		p = eol ? eol + 1 : p + len;
	}
	return 0;
}

/* Who may own what devgated trusts: root, or the user running it (--check-config as a user). */
static bool owner_trusted(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* The kind of file st is, for a refusal ("a FIFO"). */
static const char *file_kind(const struct stat *st)
{
	switch (st->st_mode & S_IFMT) {
	case S_IFIFO:
		return "a FIFO";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	case S_IFDIR:
		return "a directory";
	case S_IFLNK:
		return "a symlink";
	default:
		return "not a regular file";
	}
}

/*
 * Refuses the configuration file path because of what, a part of the way to
 * it (part: "the file", "the directory" or "the symlink"), whose state st is
 * not trusted: sets err with the reason and returns -EPERM.
 */
static int untrusted(const char *path, const char *part, const char *what, const struct stat *st,
		     struct dg_error *err)
{
	if (!owner_trusted(st->st_uid))
		dg_error_set(err, DG_E_CONFIG, EPERM,
			     "%s is not trusted: %s %s is owned by uid %u, not root", path, part,
			     what, (unsigned int)st->st_uid);
	else if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode))
		dg_error_set(err, DG_E_CONFIG, EPERM,
			     "%s is not trusted: %s is %s, not a regular file", path, what,
			     file_kind(st));
	else if (S_ISDIR(st->st_mode) && strcmp(part, "the file") == 0)
		dg_error_set(err, DG_E_CONFIG, EPERM,
			     "%s is not trusted: %s is a directory, not a regular file", path,
			     what);
	else
		dg_error_set(err, DG_E_CONFIG, EPERM,
			     "%s is not trusted: %s %s is writable by its group or others "
			     "(mode %04o)",
			     path, part, what, (unsigned int)(st->st_mode & 07777));
	dg_error_hint(err, "devgate.conf must be a regular file that only root can change: "
			   "owned by root, not writable by group or others, in directories "
			   "likewise (chown root; chmod go-w)");
	return -EPERM;
}

/*
 * Whether st, a directory on the way to the configuration file, is one only
 * its trusted owner can change: not writable by group or others, or sticky
 * (as /tmp, where only an entry's owner may rename or remove it, and the
 * entry below is checked in turn).
 */
static bool dir_trusted(const struct stat *st)
{
	return owner_trusted(st->st_uid) &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* Whether st is the null device, which reads as an empty file (--config /dev/null). */
static bool is_null_device(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

/* The way to the configuration file so far: the directory reached (checked) and its path. */
struct walk {
	const char *path; /* the file as named, for messages */
	int dir;
	char at[PATH_MAX]; /* "" for / */
	char todo[PATH_MAX];
};

/*
 * Moves w into the directory name below its own (".." goes up; NULL: /),
 * opened without following a symlink, and checks it. Returns 0, or a
 * negative errno with err set.
 */
static int walk_into(struct walk *w, const char *name, struct dg_error *err)
{
	int fd = name ? openat(w->dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
		      : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	size_t len = strlen(w->at);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		safe_close(fd);
		return dg_error_set(err, DG_E_CONFIG, errno, "cannot read %s: %m", w->path);
	}
	safe_close(w->dir);
	w->dir = fd;
	if (!name)
		len = 0;
	else if (strcmp(name, "..") == 0)
		len = strrchr(w->at, '/') ? (size_t)(strrchr(w->at, '/') - w->at) : 0;
	else if (snprintf(w->at + len, sizeof(w->at) - len, "/%s", name) >=
		 (int)(sizeof(w->at) - len))
		return dg_error_set(err, DG_E_CONFIG, ENAMETOOLONG, "%s: the path is too long",
				    w->path);
	else
		len = strlen(w->at);
	w->at[len] = '\0';
	if (!dir_trusted(&st))
		return untrusted(w->path, "the directory", w->at[0] ? w->at : "/", &st, err);
	return 0;
}

/*
 * Follows the symlink name in w's directory, st its lstat: the rest of the
 * way, after ("" or "/..."), goes on from where it leads. Returns 0, or a
 * negative errno with err set.
 */
static int walk_link(struct walk *w, const char *name, const struct stat *st, const char *after,
		     struct dg_error *err)
{
	char target[PATH_MAX], rest[PATH_MAX], shown[sizeof(w->at) + NAME_MAX + 2];
	ssize_t n;

	if (!owner_trusted(st->st_uid)) {
		snprintf(shown, sizeof(shown), "%s/%s", w->at, name);
		return untrusted(w->path, "the symlink", shown, st, err);
	}
	n = readlinkat(w->dir, name, target, sizeof(target) - 1);
	if (n < 0)
		return dg_error_set(err, DG_E_CONFIG, errno, "cannot read %s: %m", w->path);
	target[n] = '\0';
	if (snprintf(rest, sizeof(rest), "%s%s", target, after) >= (int)sizeof(rest))
		return dg_error_set(err, DG_E_CONFIG, ENAMETOOLONG, "%s: the path is too long",
				    w->path);
	snprintf(w->todo, sizeof(w->todo), "%s", rest);
	return target[0] == '/' ? walk_into(w, NULL, err) : 0;
}

/*
 * Opens name in w's directory, st its lstat, when it is a regular file that
 * only root can change, and checks that what opened is what was checked.
 * Returns 0 with the descriptor in *ret (-1 for the null device), or a
 * negative errno with err set.
 */
static int walk_open(struct walk *w, const char *name, const struct stat *st, int *ret,
		     struct dg_error *err)
{
	char file[sizeof(w->at) + NAME_MAX + 2];
	auto_close int fd = -1;
	struct stat opened;

	snprintf(file, sizeof(file), "%s/%s", w->at, name);
	if (is_null_device(st)) {
		*ret = -1;
		return 0;
	}
	if (!S_ISREG(st->st_mode) || !owner_trusted(st->st_uid) ||
	    (st->st_mode & (S_IWGRP | S_IWOTH)))
		return untrusted(w->path, "the file", file, st, err);
	fd = openat(w->dir, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &opened) < 0)
		return dg_error_set(err, DG_E_CONFIG, errno, "cannot read %s: %m", w->path);
	if (opened.st_dev != st->st_dev || opened.st_ino != st->st_ino)
		return dg_error_set(err, DG_E_CONFIG, EAGAIN, "%s changed while it was read",
				    w->path);
	*ret = TAKE_FD(fd);
	return 0;
}

/*
 * Walks w from / to its file, one name at a time as the kernel would,
 * checking every directory it enters (walk_into) and every symlink it
 * follows (owned by root: the directory it is in was checked, so only root
 * could have made it), then opens the file (walk_open). Returns 0 with the
 * descriptor in *ret, or a negative errno with err set.
 */
static int walk_to_file(struct walk *w, int *ret, struct dg_error *err)
{
	unsigned int links = 0;
	int r = walk_into(w, NULL, err);

	for (const char *p = w->todo; r == 0;) {
		char name[NAME_MAX + 1];
		size_t len;
		struct stat st;
		bool last;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (len > NAME_MAX)
			return dg_error_set(err, DG_E_CONFIG, ENAMETOOLONG,
					    "%s: a name in the path is too long", w->path);
		memcpy(name, len ? p : ".", len ? len : 2);
		name[len ? len : 1] = '\0';
		p += len;
		last = p[strspn(p, "/")] == '\0';
		if (fstatat(w->dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return dg_error_set(err, DG_E_CONFIG, errno, "cannot read %s: %m", w->path);
		if (S_ISLNK(st.st_mode)) {
			if (++links > 40)
				return dg_error_set(err, DG_E_CONFIG, ELOOP, "cannot read %s: %s",
						    w->path, strerror(ELOOP));
			r = walk_link(w, name, &st, p, err);
			p = w->todo;
		} else if (last && S_ISDIR(st.st_mode)) {
			return untrusted(w->path, "the file", w->path, &st, err);
		} else if (!last) {
			r = strcmp(name, ".") == 0 ? 0 : walk_into(w, name, err);
		} else if (*p == '/') {
			/* "FILE/": a directory is asked for, as the kernel would say. */
			return dg_error_set(err, DG_E_CONFIG, ENOTDIR, "cannot read %s: %s",
					    w->path, strerror(ENOTDIR));
		} else {
			return walk_open(w, name, &st, ret, err);
		}
	}
	return r;
}

/*
 * Opens the configuration file path for reading, when only root could have
 * written what it says: every directory from / to it, every symlink on the
 * way and the file itself owned by root and not writable by others, the
 * file a regular one. Each name is looked at before it is opened and opened
 * without following a symlink, so a name swapped after its check fails to
 * open; a FIFO or a device is never opened, and the file is opened without
 * blocking. Returns 0 with the descriptor in *ret (-1 for the null device:
 * no settings), or a negative errno with err set.
 */
static int open_trusted(const char *path, int *ret, struct dg_error *err)
{
	struct walk w = { .path = path, .dir = -1 };
	char cwd[PATH_MAX];
	int r;

	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return dg_error_set(err, DG_E_CONFIG, errno, "cannot read %s: %m", path);
	if (snprintf(w.todo, sizeof(w.todo), "%s%s%s", path[0] == '/' ? "" : cwd,
		     path[0] == '/' ? "" : "/", path) >= (int)sizeof(w.todo))
		return dg_error_set(err, DG_E_CONFIG, ENAMETOOLONG, "%s: the path is too long",
				    path);
	r = walk_to_file(&w, ret, err);
	safe_close(w.dir);
	return r;
}

int config_load(struct dg_config *c, const char *path, bool required, struct dg_error *err)
{
	auto_free char *text = NULL;
	auto_close int fd = -1;
	size_t len = 0;
	int r;

	r = open_trusted(path, &fd, err);
	if (r == -ENOENT && !required) {
		*err = (struct dg_error){ 0 };
		log_debug("no configuration file %s; using defaults", path);
		return 0;
	}
	if (r < 0)
		return r;
	if (fd < 0)
		return 0;
	r = read_fd_full(fd, CONFIG_MAX, &text, &len);
	if (r == -EFBIG)
		return dg_error_set(err, DG_E_CONFIG, EFBIG, "%s: larger than %zu bytes", path,
				    CONFIG_MAX);
	if (r < 0)
		return dg_error_set(err, DG_E_CONFIG, r, "cannot read %s: %s", path, strerror(-r));
	if (strlen(text) != len)
		return dg_error_set(err, DG_E_CONFIG, EINVAL, "%s: contains a NUL byte", path);
	return config_parse(c, path, text, err);
}

static void print_key(const struct dg_config *c, const struct key *k, FILE *f)
{
	const char *const *s = cfield(c, k);

	fprintf(f, "%s = ", k->name);
	switch (k->type) {
	case K_ABSPATH:
	case K_PATH:
	case K_OPTPATH:
	case K_LISTEN:
		fprintf(f, "%s\n", *s ? *s : "");
		break;
	case K_MODE:
		fprintf(f, "%04o\n", (unsigned int)c->node_mode);
		break;
	case K_OWNER:
		fprintf(f, "%u:%u\n", (unsigned int)c->node_uid, (unsigned int)c->node_gid);
		break;
	case K_MS:
	case K_HEAL_MS:
	case K_COUNT:
		fprintf(f, "%u\n", *(const unsigned int *)cfield(c, k));
		break;
	case K_GROUP:
		print_group(*(const gid_t *)cfield(c, k), f);
		break;
	case K_BOOL:
		fprintf(f, "%s\n", *(const bool *)cfield(c, k) ? "true" : "false");
		break;
	case K_LEVEL:
		fprintf(f, "%s\n", level_names[c->log_level]);
		break;
	case K_SECCOMP:
		fprintf(f, "%s\n", confine_mode_name(c->seccomp));
		break;
	case K_GATE:
		fprintf(f, "%s\n", c->gate_beside ? "beside" : "replace");
		break;
	case K_ALLOW: {
		char ids[1024];

		policy_allow_text(&c->policy, ids, sizeof(ids));
		fprintf(f, "%s\n", ids);
		break;
	}
	case K_DEVALLOW: {
		char devs[HOSTDEV_MAX_ALLOW * 132];

		hostdev_allow_text(&c->device_allow, devs, sizeof(devs));
		fprintf(f, "%s\n", devs);
		break;
	}
	}
}

/* Writes key k's line as print_key() would, so two configurations can be compared. */
static void key_text(const struct dg_config *c, const struct key *k, char *buf, size_t len)
{
	FILE *f = fmemopen(buf, len, "w");

	buf[0] = '\0';
	if (f) {
		print_key(c, k, f);
		fclose(f);
	}
}

void config_take_policy(struct dg_config *c, struct dg_config *from, char *restart, size_t len)
{
	size_t off = 0;

	restart[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		char was[LINE_MAX_LEN + 64], now[LINE_MAX_LEN + 64];

		if (keys[i].type == K_ALLOW || keys[i].type == K_DEVALLOW || off >= len)
			continue;
		key_text(c, &keys[i], was, sizeof(was));
		key_text(from, &keys[i], now, sizeof(now));
		if (strcmp(was, now) != 0)
			off += (size_t)snprintf(restart + off, len - off, "%s%s", off ? ", " : "",
						keys[i].name);
	}
	policy_free(&c->policy);
	c->policy = from->policy;
	from->policy = (struct dg_policy){ 0 };
	c->device_allow = from->device_allow;
}

void config_print(const struct dg_config *c, FILE *f)
{
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		print_key(c, &keys[i], f);
	policy_print(&c->policy, f);
}
