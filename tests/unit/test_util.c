// SPDX-License-Identifier: Apache-2.0
/* Number parsing, file helpers, cgroup text parsers. */
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
#include <unistd.h>

#include "proccg.h"
#include "sys/cgroup.h"
#include "cleanup.h"
#include "util.h"

static void test_parse_numbers(void **state)
{
	uint32_t u;
	uint64_t v;
	pid_t pid;
	mode_t mode;

	(void)state;
	assert_int_equal(parse_u32("4294967295", &u), 0);
	assert_int_equal(u, 4294967295u);
	assert_int_equal(parse_u32("4294967296", &u), -ERANGE);
	assert_int_equal(parse_u32("-1", &u), -EINVAL);
	assert_int_equal(parse_u32(" 1", &u), -EINVAL);
	assert_int_equal(parse_u32("1x", &u), -EINVAL);
	assert_int_equal(parse_u32("", &u), -EINVAL);
	assert_int_equal(parse_u64("18446744073709551615", &v), 0);
	assert_int_equal(parse_pid("0", &pid), -ERANGE);
	assert_int_equal(parse_pid("2147483648", &pid), -ERANGE);
	assert_int_equal(parse_pid("4242", &pid), 0);
	assert_int_equal(pid, 4242);
	assert_int_equal(parse_mode("0666", &mode), 0);
	assert_int_equal(mode, 0666);
	assert_int_equal(parse_mode("0668", &mode), -EINVAL);
	assert_int_equal(parse_mode("17777", &mode), -ERANGE);
}

static void test_strstrip(void **state)
{
	char a[] = "  x y \t\n", b[] = "", c[] = " ";

	(void)state;
	assert_string_equal(strstrip(a), "x y");
	assert_string_equal(strstrip(b), "");
	assert_string_equal(strstrip(c), "");
}

static void test_atomic_write(void **state)
{
	char dir[] = "/tmp/devgate-unit.XXXXXX";
	auto_close int dfd = -1;
	auto_free char *text = NULL;
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(write_file_atomic_at(dfd, "f", "one", 3, 0600, true), 0);
	assert_int_equal(write_file_atomic_at(dfd, "f", "two!", 4, 0600, false), 0);
	assert_int_equal(read_file_at(dfd, "f", 100, &text, &len), 0);
	assert_string_equal(text, "two!");
	assert_int_equal(len, 4);
	/* No temporary file is left behind. */
	assert_int_equal(faccessat(dfd, ".f.tmp", F_OK, 0), -1);
	free(TAKE_PTR(text));
	assert_int_equal(read_file_at(dfd, "f", 3, &text, NULL), -EFBIG);
	assert_int_equal(read_file_at(dfd, "f", 4, &text, NULL), 0);
	assert_int_equal(unlinkat(dfd, "f", 0), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_path_parent(void **state)
{
	char dir[16];
	const char *name;

	(void)state;
	assert_int_equal(path_parent("/etc/cdi/devgate.json", dir, sizeof(dir), &name), 0);
	assert_string_equal(dir, "/etc/cdi");
	assert_string_equal(name, "devgate.json");
	assert_int_equal(path_parent("/x", dir, sizeof(dir), &name), 0);
	assert_string_equal(dir, "/");
	assert_string_equal(name, "x");
	assert_int_equal(path_parent("spec.json", dir, sizeof(dir), &name), 0);
	assert_string_equal(dir, ".");
	assert_int_equal(path_parent("dir/", dir, sizeof(dir), &name), 0);
	assert_string_equal(name, "");
	assert_int_equal(path_parent("/a/very/long/directory/x", dir, sizeof(dir), &name),
			 -ENAMETOOLONG);
}

static const char hybrid_then_unified[] =
	"30 1 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
	"41 30 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	"90 1 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";

static bool not_top(const char *path)
{
	return strcmp(path, "/sys/fs/cgroup") != 0;
}

static void test_mountinfo(void **state)
{
	auto_free char *mnt = NULL;

	(void)state;
	assert_int_equal(
		mountinfo_find_cgroup2(
			"30 1 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
			"31 30 0:27 /sub /x rw - cgroup2 cgroup2 rw\n"
			"41 31 0:38 / /sys/fs/cgroup/uni\\040fied rw,relatime - cgroup2 cgroup2 rw\n",
			NULL, &mnt),
		0);
	assert_string_equal(mnt, "/sys/fs/cgroup/uni fied");
	free(TAKE_PTR(mnt));
	/* Stacked: cgroup2 on /sys/fs/cgroup over the hybrid one; the last usable wins. */
	assert_int_equal(mountinfo_find_cgroup2(hybrid_then_unified, NULL, &mnt), 0);
	assert_string_equal(mnt, "/sys/fs/cgroup");
	free(TAKE_PTR(mnt));
	assert_int_equal(mountinfo_find_cgroup2(hybrid_then_unified, not_top, &mnt), 0);
	assert_string_equal(mnt, "/sys/fs/cgroup/unified");
	free(TAKE_PTR(mnt));
	assert_int_equal(mountinfo_find_cgroup2("30 1 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n",
						NULL, &mnt),
			 -ENOENT);
}

static void test_proc_cgroup(void **state)
{
	auto_free char *p = NULL;

	(void)state;
	assert_int_equal(proc_cgroup_parse("9:name=systemd:/\n5:devices:/x\n0::/c1/sub\n", &p), 0);
	assert_string_equal(p, "/c1/sub");
	free(TAKE_PTR(p));
	assert_int_equal(proc_cgroup_parse("5:devices:/x\n", &p), -ENOMEDIUM);
	assert_int_equal(proc_cgroup_parse("0::\n", &p), -EINVAL);
}

static void test_ancestor(void **state)
{
	(void)state;
	assert_true(cgroup_path_is_ancestor("/", "/a"));
	assert_true(cgroup_path_is_ancestor("/a", "/a"));
	assert_true(cgroup_path_is_ancestor("/a", "/a/b"));
	assert_false(cgroup_path_is_ancestor("/a", "/ab"));
	assert_false(cgroup_path_is_ancestor("/a/b", "/a"));
}

static void duration_ok(const char *s, int64_t want)
{
	int64_t v = -1;

	assert_int_equal(parse_duration(s, &v), 0);
	assert_int_equal(v, want);
}

static void duration_bad(const char *s, int want)
{
	int64_t v = -1;

	assert_int_equal(parse_duration(s, &v), want);
	assert_int_equal(v, -1); /* untouched */
}

static void test_parse_duration(void **state)
{
	(void)state;
	duration_ok("90s", 90);
	duration_ok("90", 90);
	duration_ok("10m", 600);
	duration_ok("2h", 7200);
	duration_ok("1d", 86400);
	duration_ok("1s", 1);
	duration_ok("007s", 7);
	duration_ok("366d", DURATION_MAX_S);
	duration_ok("8784h", DURATION_MAX_S);
	duration_ok("31622400", DURATION_MAX_S);
	/* zero, and past the limit */
	duration_bad("0", -ERANGE);
	duration_bad("0s", -ERANGE);
	duration_bad("000h", -ERANGE);
	duration_bad("367d", -ERANGE);
	duration_bad("31622401s", -ERANGE);
	duration_bad("527041m", -ERANGE);
	duration_bad("99999999999999999999s", -ERANGE);
	duration_bad("18446744073709551617", -ERANGE);
	duration_bad("9999999999999999999999999", -ERANGE);
	/* garbage */
	duration_bad(NULL, -EINVAL);
	duration_bad("", -EINVAL);
	duration_bad("s", -EINVAL);
	duration_bad("-5s", -EINVAL);
	duration_bad("+5s", -EINVAL);
	duration_bad(" 5s", -EINVAL);
	duration_bad("5s ", -EINVAL);
	duration_bad("5 s", -EINVAL);
	duration_bad("1.5h", -EINVAL);
	duration_bad("5ss", -EINVAL);
	duration_bad("5s5", -EINVAL);
	duration_bad("1h30m", -EINVAL);
	duration_bad("2w", -EINVAL);
	duration_bad("5S", -EINVAL);
	duration_bad("0x10", -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_numbers), cmocka_unit_test(test_strstrip),
		cmocka_unit_test(test_atomic_write),  cmocka_unit_test(test_path_parent),
		cmocka_unit_test(test_mountinfo),     cmocka_unit_test(test_proc_cgroup),
		cmocka_unit_test(test_ancestor),      cmocka_unit_test(test_parse_duration),
	};

	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
