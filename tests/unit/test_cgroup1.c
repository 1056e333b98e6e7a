// SPDX-License-Identifier: Apache-2.0
/* cgroup v1 devices: the mountinfo, /proc/PID/cgroup and devices.list parsers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgv1.h"
#include "devgate.h"
#include "sys/cgroup1.h"
#include "cleanup.h"

static const char hybrid[] =
	"30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"35 30 0:32 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
	"36 30 0:33 / /sys/fs/cgroup/devices\\040x rw - cgroup cgroup rw,devicesx\n"
	"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char comounted[] =
	"1 0 0:1 / /sys/fs/cgroup/cpu,devices rw - cgroup cg rw,cpu,devices\n"
	"2 0 0:1 / /a\\040b rw - cgroup cg rw,devices,memory\n";

/* The later mount hides the earlier one: only the earlier is usable. */
static bool not_last(const char *path)
{
	return strcmp(path, "/a b") != 0;
}

static void test_mountinfo(void **state)
{
	auto_free char *mnt = NULL;

	(void)state;
	assert_int_equal(cgroup1_mountinfo_find(hybrid, NULL, &mnt), 0);
	assert_string_equal(mnt, "/sys/fs/cgroup/devices");
	free(TAKE_PTR(mnt));
	/* Co-mounted controllers, an escaped path, and a stacked later mount. */
	assert_int_equal(cgroup1_mountinfo_find(comounted, NULL, &mnt), 0);
	assert_string_equal(mnt, "/a b");
	free(TAKE_PTR(mnt));
	assert_int_equal(cgroup1_mountinfo_find(comounted, not_last, &mnt), 0);
	assert_string_equal(mnt, "/sys/fs/cgroup/cpu,devices");
	free(TAKE_PTR(mnt));
	/* A bind of a sub-cgroup is not the hierarchy's root; pure v2 has none. */
	assert_int_equal(
		cgroup1_mountinfo_find("1 0 0:1 /lxc /sys/fs/cgroup/devices rw - cgroup cg "
				       "rw,devices\n",
				       NULL, &mnt),
		-ENOMEDIUM);
	assert_int_equal(cgroup1_mountinfo_find(
				 "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", NULL, &mnt),
			 -ENOMEDIUM);
	assert_null(mnt);
}

static void test_proc_cgroup(void **state)
{
	auto_free char *p = NULL;

	(void)state;
	assert_int_equal(cgroup1_devices_parse("9:name=systemd:/\n5:devices:/x/y\n0::/c1\n", &p),
			 0);
	assert_string_equal(p, "/x/y");
	free(TAKE_PTR(p));
	assert_int_equal(cgroup1_devices_parse("0::/c1\n3:cpu,devices,memory:/z", &p), 0);
	assert_string_equal(p, "/z");
	free(TAKE_PTR(p));
	/* "devicesx" and a name= hierarchy are not the controller. */
	assert_int_equal(cgroup1_devices_parse("4:devicesx:/a\n9:name=devices:/b\n0::/\n", &p),
			 -ENOMEDIUM);
	assert_int_equal(cgroup1_devices_parse("0::/only-v2\n", &p), -ENOMEDIUM);
	assert_int_equal(cgroup1_devices_parse("", &p), -ENOMEDIUM);
	assert_int_equal(cgroup1_devices_parse("5:devices:\n", &p), -EINVAL);
	assert_int_equal(cgroup1_devices_parse("5:devices:rel\n", &p), -EINVAL);
	assert_null(p);
}

static void test_list(void **state)
{
	static const char runc[] = "b *:* m\nc *:* m\nc 1:3 rwm\nc 136:* rwm\nc 195:0 rw\n";
	struct cgv1_rule r;

	(void)state;
	assert_int_equal(cgv1_list_access(runc, 'c', 1, 3),
			 DG_ACC_READ | DG_ACC_WRITE | DG_ACC_MKNOD);
	assert_int_equal(cgv1_list_access(runc, 'c', 136, 7),
			 DG_ACC_READ | DG_ACC_WRITE | DG_ACC_MKNOD);
	assert_int_equal(cgv1_list_access(runc, 'c', 195, 0),
			 DG_ACC_READ | DG_ACC_WRITE | DG_ACC_MKNOD);
	assert_int_equal(cgv1_list_access(runc, 'c', 195, 1), DG_ACC_MKNOD);
	assert_int_equal(cgv1_list_access(runc, 'b', 8, 0), DG_ACC_MKNOD);
	assert_int_equal(cgv1_list_access("a *:* rwm\n", 'c', 195, 1),
			 DG_ACC_READ | DG_ACC_WRITE | DG_ACC_MKNOD);
	assert_int_equal(cgv1_list_access("", 'c', 195, 1), 0);
	assert_int_equal(cgv1_list_access("c 195:0 rx\n", 'c', 195, 0), -EINVAL);
	assert_int_equal(cgv1_list_access("c 195 rw\n", 'c', 195, 0), -EINVAL);
	assert_int_equal(cgv1_rule_parse("c 195:255 w", 11, &r), 0);
	assert_true(r.type == 'c' && r.major == 195 && r.minor == 255 && r.acc == DG_ACC_WRITE);
	assert_int_equal(cgv1_rule_parse("c 1:* ", 6, &r), -EINVAL);
	assert_int_equal(cgv1_rule_parse("x 1:1 r", 7, &r), -EINVAL);
	assert_int_equal(cgv1_rule_parse("c 99999999999:1 r", 17, &r), -EINVAL);
}

/* On a host with cgroup v1 alone the other hierarchies tell whose a process is. */
static void test_within(void **state)
{
	static const char ct[] = "5:memory:/ct\n4:devices:/ct\n3:pids:/ct\n2:cpu:/\n0::/\n";

	(void)state;
	/* The container's own and its sub-cgroups'; the v2 line and cpu's root tell nothing. */
	assert_int_equal(cgroup1_within(ct, ct), 1);
	assert_int_equal(
		cgroup1_within(ct, "5:memory:/ct/a\n4:devices:/x\n3:pids:/ct\n2:cpu:/y\n0::/z\n"),
		1);
	/* Written into the devices cgroup alone, or a sibling path that only starts the same. */
	assert_int_equal(cgroup1_within(ct, "5:memory:/\n4:devices:/ct\n3:pids:/\n2:cpu:/\n0::/\n"),
			 0);
	assert_int_equal(cgroup1_within(ct, "5:memory:/ct2\n4:devices:/ct\n3:pids:/ct\n"), 0);
	/* A hierarchy the process lacks is not the container's. */
	assert_int_equal(cgroup1_within(ct, "4:devices:/ct\n3:pids:/ct\n"), 0);
	assert_int_equal(cgroup1_within("garbage", ct), -EBADMSG);
}

static void test_self(void **state)
{
	struct cg1root r = { .fd = -1 };
	auto_free char *p = NULL;
	int rc;

	(void)state;
	rc = cg1root_open(&r);
	if (rc == -ENOMEDIUM)
		return; /* a pure v2 host */
	assert_int_equal(rc, 0);
	assert_true(r.fd >= 0);
	assert_int_equal(cgroup1_devices_of_pid(getpid(), &p), 0);
	assert_true(p[0] == '/');
	cg1root_close(&r);
	assert_int_equal(r.fd, -1);
	assert_null(r.mount);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mountinfo), cmocka_unit_test(test_proc_cgroup),
		cmocka_unit_test(test_list),	  cmocka_unit_test(test_self),
		cmocka_unit_test(test_within),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
