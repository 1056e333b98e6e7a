// SPDX-License-Identifier: Apache-2.0
/* The OCI hook's inputs: state, stage, config.json, and which request wins. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci.h"

static void state_ok(void **st)
{
	struct oci_state s = { 0 };
	struct dg_error err = { 0 };

	(void)st;
	assert_int_equal(
		oci_state_parse("{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":"
				"\"creating\",\"pid\":42,\"bundle\":\"/b\",\"annotations\":{}}",
				&s, &err),
		0);
	assert_string_equal(s.id, "c1");
	assert_string_equal(s.bundle, "/b");
	assert_int_equal(s.pid, 42);
	oci_state_done(&s);
}

static void state_bad(const char *text, const char *why)
{
	struct oci_state s = { 0 };
	struct dg_error err = { 0 };
	char want[512];

	assert_int_equal(oci_state_parse(text, &s, &err), -EINVAL);
	assert_int_equal(err.code, DG_E_HOOK);
	snprintf(want, sizeof(want), "invalid OCI state on stdin: %s", why);
	assert_string_equal(err.message, want);
	assert_null(s.id);
}

static void state_rejects(void **st)
{
	(void)st;
	state_bad("", "it is empty");
	state_bad("garbage", "not a JSON object");
	state_bad("[]", "not a JSON object");
	state_bad("{\"status\":\"creating\",\"bundle\":\"/b\"}", "missing or bad 'id'");
	state_bad("{\"id\":\"a\\nb\",\"status\":\"creating\",\"bundle\":\"/b\"}",
		  "missing or bad 'id'");
	state_bad("{\"id\":\"c\",\"bundle\":\"/b\"}", "missing or bad 'status'");
	state_bad("{\"id\":\"c\",\"status\":\"creating\",\"bundle\":\"b\"}",
		  "'bundle' must be an absolute path");
	state_bad("{\"id\":\"c\",\"status\":\"creating\",\"bundle\":\"/b\",\"pid\":-1}",
		  "'pid' out of range");
}

static void stages(void **st)
{
	struct dg_error err = { 0 };
	enum oci_stage s;

	(void)st;
	assert_int_equal(oci_stage("createRuntime", "x", &s, &err), 0);
	assert_int_equal(s, STAGE_CREATE);
	assert_int_equal(oci_stage("prestart", "x", &s, &err), 0);
	assert_int_equal(s, STAGE_CREATE);
	assert_int_equal(oci_stage("poststop", "x", &s, &err), 0);
	assert_int_equal(s, STAGE_POSTSTOP);
	assert_int_equal(oci_stage(NULL, "creating", &s, &err), 0);
	assert_int_equal(s, STAGE_CREATE);
	assert_int_equal(oci_stage(NULL, "stopped", &s, &err), 0);
	assert_int_equal(s, STAGE_POSTSTOP);
	assert_int_equal(oci_stage("createContainer", "x", &s, &err), -EINVAL);
	assert_int_equal(oci_stage(NULL, "running", &s, &err), -EINVAL);
	assert_string_equal(err.message, "nothing to do for a container in state 'running'");
}

static void config_ok(void **st)
{
	struct oci_config c = { 0 };
	struct dg_error err = { 0 };

	(void)st;
	assert_int_equal(oci_config_parse("{\"root\":{\"path\":\"rootfs\"},\"process\":{\"env\":"
					  "[\"A=1\"]},\"annotations\":{\"k\":\"v\"}}",
					  "/b", &c, &err),
			 0);
	assert_string_equal(c.root, "/b/rootfs");
	assert_non_null(c.annotations);
	assert_int_equal(json_object_array_length(c.env), 1);
	oci_config_done(&c);
	assert_int_equal(oci_config_parse("{\"root\":{\"path\":\"/var/lib/x/rootfs..d\"}}", "/b",
					  &c, &err),
			 0);
	assert_string_equal(c.root, "/var/lib/x/rootfs..d");
	oci_config_done(&c);
}

static void config_bad(const char *text, const char *why)
{
	struct oci_config c = { 0 };
	struct dg_error err = { 0 };
	char want[512];

	assert_int_equal(oci_config_parse(text, "/b", &c, &err), -EINVAL);
	snprintf(want, sizeof(want), "invalid /b/config.json: %s", why);
	assert_string_equal(err.message, want);
	assert_null(c.root);
}

static void config_rejects(void **st)
{
	(void)st;
	config_bad("nope", "not a JSON object");
	config_bad("{}", "no root.path");
	config_bad("{\"root\":{\"path\":\"\"}}", "no root.path");
	config_bad("{\"root\":{\"path\":\"../x\"}}", "root.path must not contain '..'");
	config_bad("{\"root\":{\"path\":\"a/../../x\"}}", "root.path must not contain '..'");
	config_bad("{\"root\":{\"path\":\"/a/..\"}}", "root.path must not contain '..'");
	config_bad("{\"root\":{\"path\":\"r\"},\"annotations\":[]}",
		   "annotations must be an object");
	config_bad("{\"root\":{\"path\":\"r\"},\"process\":{\"env\":\"A=1\"}}",
		   "process.env must be an array");
}

static struct oci_config config(const char *text)
{
	struct oci_config c = { 0 };
	struct dg_error err = { 0 };

	assert_int_equal(oci_config_parse(text, "/b", &c, &err), 0);
	return c;
}

static void requests(void **st)
{
	struct oci_config c = config("{\"root\":{\"path\":\"r\"},"
				     "\"annotations\":{\"devgate.io/gpus\":\"1\"},"
				     "\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\"]}}");
	struct oci_request r = { 0 };
	struct dg_error err = { 0 };

	(void)st;
	/* CDI beats the annotation, which beats the image's env. */
	assert_int_equal(oci_request("0", &c, true, &r, &err), 0);
	assert_int_equal(r.source, REQ_CDI);
	assert_string_equal(r.gpus, "0");
	oci_request_done(&r);
	assert_int_equal(oci_request(NULL, &c, true, &r, &err), 0);
	assert_int_equal(r.source, REQ_ANNOTATION);
	assert_string_equal(r.gpus, "1");
	oci_request_done(&r);
	oci_config_done(&c);
}

static void request_env(void **st)
{
	struct oci_config c = config("{\"root\":{\"path\":\"r\"},\"process\":{\"env\":["
				     "\"NVIDIA_VISIBLE_DEVICES=0\",\"X=1\","
				     "\"NVIDIA_VISIBLE_DEVICES=ALL\"]}}");
	struct oci_request r = { 0 };
	struct dg_error err = { 0 };

	(void)st;
	/* Off by policy: the image's wish is not a request. */
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
	assert_int_equal(r.source, REQ_NONE);
	/* On: the last value wins, as in the process's environment. */
	assert_int_equal(oci_request(NULL, &c, true, &r, &err), 0);
	assert_int_equal(r.source, REQ_IMAGE_ENV);
	assert_string_equal(r.gpus, "all");
	oci_request_done(&r);
	oci_config_done(&c);
	c = config(
		"{\"root\":{\"path\":\"r\"},\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=void\"]}}");
	assert_int_equal(oci_request(NULL, &c, true, &r, &err), 0);
	assert_int_equal(r.source, REQ_NONE);
	oci_config_done(&c);
	c = config(
		"{\"root\":{\"path\":\"r\"},\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=\"]}}");
	assert_int_equal(oci_request(NULL, &c, true, &r, &err), 0);
	assert_int_equal(r.source, REQ_NONE);
	oci_config_done(&c);
	c = config(
		"{\"root\":{\"path\":\"r\"},\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=GPU-ab,1\"]}}");
	assert_int_equal(oci_request(NULL, &c, true, &r, &err), 0);
	assert_string_equal(r.gpus, "GPU-ab,1");
	oci_request_done(&r);
	oci_config_done(&c);
}

static void request_annotations(void **st)
{
	struct oci_config c =
		config("{\"root\":{\"path\":\"r\"},\"annotations\":{"
		       "\"devgate.io/gpu-count\":\"2\",\"devgate.io/gpu-arch\":\"hopper\","
		       "\"devgate.io/shared\":\"true\"}}");
	struct oci_request r = { 0 };
	struct dg_error err = { 0 };

	(void)st;
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
	assert_int_equal(r.count, 2);
	assert_string_equal(r.arch, "hopper");
	assert_true(r.shared);
	assert_null(r.gpus);
	oci_request_done(&r);
	oci_config_done(&c);
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpu-count\":\"0\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), -EINVAL);
	oci_config_done(&c);
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpus\":\"0\","
		   "\"devgate.io/gpu-count\":\"1\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), -EINVAL);
	oci_config_done(&c);
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpus\":\"0\","
		   "\"devgate.io/shared\":\"yes\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), -EINVAL);
	assert_string_equal(err.message, "annotation devgate.io/shared must be true or false");
	oci_config_done(&c);
	/* A misspelt key (gpu for gpus) is refused, not silently ignored. */
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpu\":\"0\","
		   "\"org.other/x\":\"1\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), -EINVAL);
	assert_string_equal(err.message, "unknown annotation 'devgate.io/gpu'");
	assert_int_equal(err.code, DG_E_HOOK);
	oci_config_done(&c);
}

/* An alias or a profile alone asks for GPUs; devgated knows what they mean. */
static void request_policy_annotations(void **st)
{
	struct oci_config c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{"
				     "\"devgate.io/profile\":\"train\"}}");
	struct oci_request r = { 0 };
	struct dg_error err = { 0 };

	(void)st;
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
	assert_int_equal(r.source, REQ_ANNOTATION);
	assert_string_equal(r.profile, "train");
	assert_int_equal(r.count, 0);
	assert_null(r.gpus);
	oci_request_done(&r);
	oci_config_done(&c);
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/alias\":\"h100\","
		   "\"devgate.io/gpu-count\":\"2\",\"devgate.io/gpu-min-memory\":\"80G\","
		   "\"devgate.io/gpu-min-cc\":\"9.0\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
	assert_string_equal(r.alias, "h100");
	assert_int_equal(r.count, 2);
	assert_string_equal(r.min_memory, "80G");
	assert_string_equal(r.min_cc, "9.0");
	oci_request_done(&r);
	oci_config_done(&c);
	/* Other devgate.io/ keys still say nothing alone. */
	c = config(
		"{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpu-arch\":\"ampere\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
	assert_int_equal(r.source, REQ_NONE);
	oci_request_done(&r);
	oci_config_done(&c);
}

/* devgate.io/driver: the kinds as given; from-env lets the image choose among them. */
static void request_driver(void **st)
{
	static const struct {
		const char *annot, *env, *want;
	} cases[] = {
		{ "compute,utility", "", "utility,compute" },
		{ "all", "", "utility,compute,video,graphics" },
		/* from-env: unset or empty is the toolkit's default. */
		{ "from-env", "", "utility,compute" },
		{ "from-env", "\"NVIDIA_DRIVER_CAPABILITIES=\"", "utility,compute" },
		{ "from-env", "\"NVIDIA_DRIVER_CAPABILITIES=video\"", "video" },
		/* The last value wins; kinds devgate does not mount are passed over. */
		{ "from-env",
		  "\"NVIDIA_DRIVER_CAPABILITIES=all\",\"NVIDIA_DRIVER_CAPABILITIES=compat32,compute\"",
		  "compute" },
		{ "from-env", "\"NVIDIA_DRIVER_CAPABILITIES=all\"",
		  "utility,compute,video,graphics" },
		{ "from-env", "\"NVIDIA_DRIVER_CAPABILITIES=display,ngx\"", NULL },
		/* The image's env says nothing without from-env. */
		{ "utility", "\"NVIDIA_DRIVER_CAPABILITIES=all\"", "utility" },
	};
	struct oci_request r = { 0 };
	struct dg_error err = { 0 };
	struct oci_config c;
	char text[512];

	(void)st;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text),
			 "{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpus\":\"0\","
			 "\"devgate.io/driver\":\"%s\"},\"process\":{\"env\":[%s]}}",
			 cases[i].annot, cases[i].env);
		c = config(text);
		assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
		if (cases[i].want)
			assert_string_equal(r.driver, cases[i].want);
		else
			assert_null(r.driver);
		oci_request_done(&r);
		oci_config_done(&c);
	}
	/* Nothing asks for a GPU: nothing to go with, as devgate.io/ttl. */
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{"
		   "\"devgate.io/driver\":\"compute\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), 0);
	assert_int_equal(r.source, REQ_NONE);
	assert_null(r.driver);
	oci_config_done(&c);
	c = config("{\"root\":{\"path\":\"r\"},\"annotations\":{\"devgate.io/gpus\":\"0\","
		   "\"devgate.io/driver\":\"compute,cuda\"}}");
	assert_int_equal(oci_request(NULL, &c, false, &r, &err), -EINVAL);
	assert_string_equal(err.message, "annotation devgate.io/driver='compute,cuda': driver "
					 "capability 'cuda' is unknown");
	assert_int_equal(err.code, DG_E_HOOK);
	oci_config_done(&c);
}

/* The rootfs the hook reports: inside the bundle, whatever a symlink says. */
static void root_identity(void **state)
{
	char bundle[] = "/tmp/devgate-oci.XXXXXX", path[256];
	struct oci_config cfg = { 0 };
	struct dg_error err = { 0 };
	struct stat st;
	uint64_t dev = 0, ino = 0;

	(void)state;
	assert_non_null(mkdtemp(bundle));
	snprintf(path, sizeof(path), "%s/rootfs", bundle);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(oci_config_parse("{\"root\":{\"path\":\"rootfs\"}}", bundle, &cfg, &err),
			 0);
	assert_true(cfg.root_in_bundle);
	assert_int_equal(oci_root_identity(bundle, &cfg, &dev, &ino, &err), 0);
	assert_true(dev == (uint64_t)st.st_dev && ino == (uint64_t)st.st_ino);
	oci_config_done(&cfg);
	/* A symlink to "/" resolves to the bundle itself, never the host's root. */
	snprintf(path, sizeof(path), "%s/link", bundle);
	assert_int_equal(symlink("/", path), 0);
	assert_int_equal(oci_config_parse("{\"root\":{\"path\":\"link\"}}", bundle, &cfg, &err), 0);
	assert_int_equal(oci_root_identity(bundle, &cfg, &dev, &ino, &err), 0);
	assert_int_equal(stat(bundle, &st), 0);
	assert_true(dev == (uint64_t)st.st_dev && ino == (uint64_t)st.st_ino);
	oci_config_done(&cfg);
	/* Absolute, and missing: a hook error naming the path. */
	assert_int_equal(oci_config_parse("{\"root\":{\"path\":\"/nonexistent/rootfs\"}}", bundle,
					  &cfg, &err),
			 0);
	assert_false(cfg.root_in_bundle);
	assert_int_equal(oci_root_identity(bundle, &cfg, &dev, &ino, &err), -ENOENT);
	assert_int_equal(err.code, DG_E_HOOK);
	assert_non_null(strstr(err.message, "cannot open the rootfs /nonexistent/rootfs"));
	oci_config_done(&cfg);
	unlink(path);
	snprintf(path, sizeof(path), "%s/rootfs", bundle);
	rmdir(path);
	rmdir(bundle);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(state_ok),
		cmocka_unit_test(state_rejects),
		cmocka_unit_test(stages),
		cmocka_unit_test(config_ok),
		cmocka_unit_test(config_rejects),
		cmocka_unit_test(requests),
		cmocka_unit_test(request_env),
		cmocka_unit_test(root_identity),
		cmocka_unit_test(request_annotations),
		cmocka_unit_test(request_policy_annotations),
		cmocka_unit_test(request_driver),
	};

	return cmocka_run_group_tests_name("oci", tests, NULL, NULL);
}
