// SPDX-License-Identifier: Apache-2.0
/*
 * Reads what an OCI hook is given (see oci.h): the runtime's state on
 * stdin and the bundle's config.json, parsed strictly and bounded in size.
 * Which of it may be trusted, and how far, is decided in cmd_hook.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "driver.h"
#include "jsonutil.h"
#include "oci.h"
#include "util.h"

static bool printable(const char *s, size_t max)
{
	size_t n = 0;

	for (; *s; s++, n++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f || n >= max)
			return false;
	}
	return n > 0;
}

void oci_state_done(struct oci_state *s)
{
	free(s->id);
	free(s->status);
	free(s->bundle);
	*s = (struct oci_state){ 0 };
}

static int bad_state(struct dg_error *err, const char *why)
{
	dg_error_set(err, DG_E_HOOK, EINVAL, "invalid OCI state on stdin: %s", why);
	dg_error_hint(err, "devgate-hook (devgatectl hook) is run by a container runtime, which "
			   "passes the container's state as JSON on stdin");
	return -EINVAL;
}

int oci_state_parse(const char *text, struct oci_state *ret, struct dg_error *err)
{
	auto_json json_object *o = NULL;
	struct oci_state s = { 0 };
	const char *id, *status, *bundle, *why;
	int64_t pid = 0;

	if (!*text)
		return bad_state(err, "it is empty");
	o = json_parse_object_why(text, &why);
	if (!o)
		return bad_state(err, why ? why : "not a JSON object");
	id = json_get_str(o, "id");
	status = json_get_str(o, "status");
	bundle = json_get_str(o, "bundle");
	if (!id || !printable(id, 1024))
		return bad_state(err, "missing or bad 'id'");
	if (!status || !printable(status, 64))
		return bad_state(err, "missing or bad 'status'");
	if (!bundle || bundle[0] != '/' || !printable(bundle, 4096))
		return bad_state(err, "'bundle' must be an absolute path");
	if (json_get_int(o, "pid", &pid) && (pid < 0 || pid > INT32_MAX))
		return bad_state(err, "'pid' out of range");
	s.id = strdup(id);
	s.status = strdup(status);
	s.bundle = strdup(bundle);
	s.pid = (pid_t)pid;
	if (!s.id || !s.status || !s.bundle) {
		oci_state_done(&s);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	*ret = s;
	return 0;
}

int oci_stage(const char *arg, const char *status, enum oci_stage *ret, struct dg_error *err)
{
	static const struct {
		const char *name;
		enum oci_stage stage;
	} stages[] = {
		{ "createRuntime", STAGE_CREATE },
		{ "prestart", STAGE_CREATE },
		{ "poststop", STAGE_POSTSTOP },
	};

	if (arg) {
		for (size_t i = 0; i < ARRAY_SIZE(stages); i++) {
			if (strcmp(arg, stages[i].name) == 0) {
				*ret = stages[i].stage;
				return 0;
			}
		}
		dg_error_set(err, DG_E_HOOK, EINVAL, "hook stage '%s' is not supported", arg);
		dg_error_hint(err, "run the hook at createRuntime (or prestart) and poststop; "
				   "createContainer sees the container's own PID namespace");
		return -EINVAL;
	}
	/* Without a stage argument (hooks.d lists several), the status tells. */
	if (strcmp(status, "creating") == 0 || strcmp(status, "created") == 0)
		*ret = STAGE_CREATE;
	else if (strcmp(status, "stopped") == 0)
		*ret = STAGE_POSTSTOP;
	else
		return dg_error_set(err, DG_E_HOOK, EINVAL,
				    "nothing to do for a container in state "
				    "'%s'",
				    status);
	return 0;
}

void oci_config_done(struct oci_config *c)
{
	free(c->root);
	json_object_put(c->annotations);
	json_object_put(c->env);
	*c = (struct oci_config){ 0 };
}

static bool has_dotdot(const char *path)
{
	const char *p = path;

	while ((p = strstr(p, "..")) != NULL) {
		bool start = p == path || p[-1] == '/';
		bool end = p[2] == '\0' || p[2] == '/';

		if (start && end)
			return true;
		p += 2;
	}
	return false;
}

static int bad_config(struct dg_error *err, const char *bundle, const char *why)
{
	return dg_error_set(err, DG_E_HOOK, EINVAL, "invalid %s/config.json: %s", bundle, why);
}

int oci_config_parse(const char *text, const char *bundle, struct oci_config *ret,
		     struct dg_error *err)
{
	const char *path, *why;
	auto_json json_object *o = json_parse_object_why(text, &why);
	json_object *root = NULL, *process = NULL, *v;
	struct oci_config c = { 0 };
	int r;

	if (!o)
		return bad_config(err, bundle, why ? why : "not a JSON object");
	if (!json_object_object_get_ex(o, "root", &root) || !(path = json_get_str(root, "path")) ||
	    !*path)
		return bad_config(err, bundle, "no root.path");
	if (has_dotdot(path) || !printable(path, 4096))
		return bad_config(err, bundle, "root.path must not contain '..'");
	c.root_in_bundle = path[0] != '/';
	if (c.root_in_bundle)
		r = asprintf(&c.root, "%s/%s", bundle, path);
	else
		r = asprintf(&c.root, "%s", path);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (json_object_object_get_ex(o, "annotations", &v) && v) {
		if (!json_object_is_type(v, json_type_object)) {
			oci_config_done(&c);
			return bad_config(err, bundle, "annotations must be an object");
		}
		c.annotations = json_object_get(v);
	}
	if (json_object_object_get_ex(o, "process", &process) && process &&
	    json_object_object_get_ex(process, "env", &v) && v) {
		if (!json_object_is_type(v, json_type_array)) {
			oci_config_done(&c);
			return bad_config(err, bundle, "process.env must be an array");
		}
		c.env = json_object_get(v);
	}
	*ret = c;
	return 0;
}

int oci_config_load(const char *bundle, struct oci_config *ret, struct dg_error *err)
{
	auto_close int dfd = -1, fd = -1;
	auto_free char *text = NULL;
	int r;

	dfd = open(bundle, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return dg_error_set(err, DG_E_HOOK, errno, "cannot open bundle %s: %m", bundle);
	fd = openat(dfd, "config.json", O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return dg_error_set(err, DG_E_HOOK, errno, "cannot open %s/config.json: %m",
				    bundle);
	r = read_fd_full(fd, OCI_CONFIG_MAX, &text, NULL);
	if (r == -EFBIG)
		return bad_config(err, bundle, "larger than 4 MiB");
	if (r < 0)
		return dg_error_set(err, DG_E_HOOK, r, "cannot read %s/config.json: %s", bundle,
				    strerror(-r));
	return oci_config_parse(text, bundle, ret, err);
}

int oci_root_identity(const char *bundle, const struct oci_config *cfg, uint64_t *ret_dev,
		      uint64_t *ret_ino, struct dg_error *err)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_MAGICLINKS,
	};
	auto_close int dfd = -1, fd = -1;
	const char *path = cfg->root;
	struct stat st;

	if (cfg->root_in_bundle) {
		dfd = open(bundle, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return dg_error_set(err, DG_E_HOOK, errno, "cannot open bundle %s: %m",
					    bundle);
		path = cfg->root + strlen(bundle) + 1;
		how.resolve |= RESOLVE_IN_ROOT;
	}
	fd = (int)syscall(SYS_openat2, dfd >= 0 ? dfd : AT_FDCWD, path, &how, sizeof(how));
	/* Without openat2 ('..' is refused already): no symlink at all. */
	if (fd < 0 && errno == ENOSYS)
		fd = openat(dfd >= 0 ? dfd : AT_FDCWD, path,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return dg_error_set(err, DG_E_HOOK, errno, "cannot open the rootfs %s: %m",
				    cfg->root);
	if (fstat(fd, &st) < 0)
		return dg_error_set(err, DG_E_HOOK, errno, "cannot stat the rootfs %s: %m",
				    cfg->root);
	*ret_dev = (uint64_t)st.st_dev;
	*ret_ino = (uint64_t)st.st_ino;
	return 0;
}

int oci_request_alias(const char *alias, struct oci_request *ret)
{
	*ret = (struct oci_request){ .source = REQ_CDI, .alias = strdup(alias) };
	return ret->alias ? 0 : -ENOMEM;
}

void oci_request_done(struct oci_request *r)
{
	free(r->gpus);
	free(r->arch);
	free(r->model);
	free(r->product);
	free(r->min_memory);
	free(r->min_cc);
	free(r->alias);
	free(r->profile);
	free(r->driver);
	*r = (struct oci_request){ 0 };
}

const char *oci_source_name(enum req_source s)
{
	switch (s) {
	case REQ_CDI:
		return "cdi";
	case REQ_ANNOTATION:
		return "annotation";
	case REQ_IMAGE_ENV:
		return "image-env";
	default:
		return "none";
	}
}

static int dup_opt(const char *s, char **ret)
{
	*ret = s ? strdup(s) : NULL;
	return s && !*ret ? -ENOMEM : 0;
}

/*
 * A misspelt devgate.io/ key would be ignored and the container would
 * start without the GPU its owner asked for: refuse it instead.
 */
static int check_annotation_keys(json_object *a, struct dg_error *err)
{
	static const char *const known[] = { ANNOT_GPUS,       ANNOT_COUNT,   ANNOT_ARCH,
					     ANNOT_MODEL,      ANNOT_PRODUCT, ANNOT_SHARED,
					     ANNOT_MIN_MEMORY, ANNOT_MIN_CC,  ANNOT_ALIAS,
					     ANNOT_PROFILE,    ANNOT_TTL,     ANNOT_SAME_NUMA,
					     ANNOT_WAIT,       ANNOT_DRIVER };

	json_object_object_foreach (a, key, val) {
		bool ok = !startswith(key, "devgate.io/");

		(void)val;
		for (size_t i = 0; !ok && i < ARRAY_SIZE(known); i++)
			ok = strcmp(key, known[i]) == 0;
		if (!ok) {
			dg_error_set(err, DG_E_HOOK, EINVAL, "unknown annotation '%.100s'", key);
			dg_error_hint(
				err,
				"devgate reads %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s "
				"and %s",
				ANNOT_GPUS, ANNOT_COUNT, ANNOT_ARCH, ANNOT_MODEL, ANNOT_PRODUCT,
				ANNOT_MIN_MEMORY, ANNOT_MIN_CC, ANNOT_SHARED, ANNOT_SAME_NUMA,
				ANNOT_ALIAS, ANNOT_PROFILE, ANNOT_TTL, ANNOT_WAIT, ANNOT_DRIVER);
			return -EINVAL;
		}
	}
	return 0;
}

/* A true/false annotation; absent is false. */
static int bool_annotation(json_object *a, const char *key, bool *ret, struct dg_error *err)
{
	const char *v = json_get_str(a, key);

	if (v && strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
		return dg_error_set(err, DG_E_HOOK, EINVAL, "annotation %s must be true or false",
				    key);
	*ret = v && strcmp(v, "true") == 0;
	return 0;
}

static int from_annotations(json_object *a, struct oci_request *r, struct dg_error *err)
{
	const char *gpus = json_get_str(a, ANNOT_GPUS), *count = json_get_str(a, ANNOT_COUNT);
	uint32_t n;
	int rc = check_annotation_keys(a, err);

	if (rc < 0)
		return rc;
	/* An alias or a profile alone asks too: devgated knows what it means. */
	if (!gpus && !count && !json_get_str(a, ANNOT_ALIAS) && !json_get_str(a, ANNOT_PROFILE))
		return 0;
	if (gpus && count)
		return dg_error_set(err, DG_E_HOOK, EINVAL,
				    "annotations %s and %s exclude each other", ANNOT_GPUS,
				    ANNOT_COUNT);
	if (count && (parse_u32(count, &n) < 0 || n == 0 || n > 64))
		return dg_error_set(err, DG_E_HOOK, EINVAL,
				    "annotation %s='%s' is not a count from "
				    "1 to 64",
				    ANNOT_COUNT, count);
	if (bool_annotation(a, ANNOT_SHARED, &r->shared, err) < 0 ||
	    bool_annotation(a, ANNOT_SAME_NUMA, &r->same_numa, err) < 0)
		return -EINVAL;
	r->source = REQ_ANNOTATION;
	r->count = count ? (int)n : 0;
	if (dup_opt(gpus, &r->gpus) < 0 || dup_opt(json_get_str(a, ANNOT_ARCH), &r->arch) < 0 ||
	    dup_opt(json_get_str(a, ANNOT_MODEL), &r->model) < 0 ||
	    dup_opt(json_get_str(a, ANNOT_PRODUCT), &r->product) < 0 ||
	    dup_opt(json_get_str(a, ANNOT_MIN_MEMORY), &r->min_memory) < 0 ||
	    dup_opt(json_get_str(a, ANNOT_MIN_CC), &r->min_cc) < 0 ||
	    dup_opt(json_get_str(a, ANNOT_ALIAS), &r->alias) < 0 ||
	    dup_opt(json_get_str(a, ANNOT_PROFILE), &r->profile) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

/* The last NAME=VALUE of process.env wins, as in execve's env; NULL when unset. */
static const char *env_value(json_object *env, const char *name)
{
	size_t n = strlen(name);
	const char *value = NULL;

	for (size_t i = 0; env && i < json_object_array_length(env); i++) {
		json_object *e = json_object_array_get_idx(env, i);
		const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e)
									 : "";

		if (strncmp(s, name, n) == 0 && s[n] == '=')
			value = s + n + 1;
	}
	return value;
}

static int from_env(json_object *env, struct oci_request *r)
{
	const char *v = env_value(env, "NVIDIA_VISIBLE_DEVICES");

	/* The toolkit's words for "no GPU": none, void, empty. */
	if (!v || !*v || strcasecmp(v, "none") == 0 || strcasecmp(v, "void") == 0)
		return 0;
	r->source = REQ_IMAGE_ENV;
	r->gpus = strdup(strcasecmp(v, "all") == 0 ? "all" : v);
	return r->gpus ? 0 : -ENOMEM;
}

/*
 * devgate.io/ttl (the lease's time to live) and devgate.io/wait (how long
 * the hook waits for busy GPUs), however the GPUs were asked for.
 */
static int duration_annotation(json_object *a, const char *key, int64_t *ret, struct dg_error *err)
{
	const char *value = a ? json_get_str(a, key) : NULL;

	if (!value)
		return 0;
	if (parse_duration(value, ret) < 0) {
		dg_error_set(err, DG_E_HOOK, EINVAL, "annotation %s='%.100s' is not a duration",
			     key, value);
		dg_error_hint(err,
			      "a duration is a whole number with an optional unit s, m, h or d "
			      "(90s, 10m, 2h, 1d), from 1 second to 366 days");
		return -EINVAL;
	}
	return 0;
}

/*
 * devgate.io/driver=from-env: the kinds NVIDIA_DRIVER_CAPABILITIES names,
 * unset or empty meaning the toolkit's default (utility,compute). The image
 * chooses only among kinds once the annotation lets it: names devgate does
 * not mount (compat32, display, ngx) are passed over. caps 0: none.
 */
static void driver_from_env(json_object *env, unsigned int *caps)
{
	const char *v = env_value(env, "NVIDIA_DRIVER_CAPABILITIES");
	char bad[32];

	*caps = 0;
	if (!v || !*v) {
		*caps = DG_DRV_UTILITY | DG_DRV_COMPUTE;
		return;
	}
	while (*v) {
		size_t n = strcspn(v, ",");
		char one[32];
		unsigned int bit;

		if (n < sizeof(one)) {
			memcpy(one, v, n);
			one[n] = '\0';
			if (driver_caps_parse(one, &bit, bad, sizeof(bad)) == 0)
				*caps |= bit;
		}
		v += n + (v[n] == ',');
	}
}

/* devgate.io/driver, however the GPUs were asked for: grant --driver's kinds. */
static int driver_annotation(const struct oci_config *cfg, struct oci_request *r,
			     struct dg_error *err)
{
	const char *value = cfg->annotations ? json_get_str(cfg->annotations, ANNOT_DRIVER) : NULL;
	unsigned int caps;
	char bad[64], text[64];

	if (!value)
		return 0;
	if (strcmp(value, ANNOT_DRIVER_FROM_ENV) == 0) {
		driver_from_env(cfg->env, &caps);
	} else if (driver_caps_parse(value, &caps, bad, sizeof(bad)) < 0) {
		dg_error_set(err, DG_E_HOOK, EINVAL,
			     "annotation %s='%.100s': driver capability '%s' is unknown",
			     ANNOT_DRIVER, value, bad);
		dg_error_hint(err,
			      "%s takes utility, compute, video, graphics or all, comma "
			      "separated, or from-env (the image's NVIDIA_DRIVER_CAPABILITIES)",
			      ANNOT_DRIVER);
		return -EINVAL;
	}
	if (!caps)
		return 0;
	driver_caps_text(caps, text, sizeof(text));
	r->driver = strdup(text);
	return r->driver ? 0 : -ENOMEM;
}

int oci_request(const char *cdi_gpus, const struct oci_config *cfg, bool allow_env,
		struct oci_request *ret, struct dg_error *err)
{
	struct oci_request r = { 0 };
	int rc = 0;

	if (cdi_gpus) {
		r.source = REQ_CDI;
		r.gpus = strdup(cdi_gpus);
		rc = r.gpus ? 0 : -ENOMEM;
	} else if (cfg->annotations) {
		rc = from_annotations(cfg->annotations, &r, err);
	}
	if (rc == 0 && r.source == REQ_NONE && allow_env)
		rc = from_env(cfg->env, &r);
	if (rc == 0 && r.source != REQ_NONE)
		rc = duration_annotation(cfg->annotations, ANNOT_TTL, &r.ttl, err);
	if (rc == 0 && r.source != REQ_NONE)
		rc = duration_annotation(cfg->annotations, ANNOT_WAIT, &r.wait, err);
	if (rc == 0 && r.source != REQ_NONE)
		rc = driver_annotation(cfg, &r, err);
	if (rc < 0) {
		oci_request_done(&r);
		if (!dg_error_is_set(err))
			dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		return rc;
	}
	*ret = r;
	return 0;
}
