// SPDX-License-Identifier: Apache-2.0
/* NUMA topology: CPU lists, the nodes of a fixture host, the reason's words. */
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

#include "numa.h"
#include "sys/topo.h"

static void roundtrip(const char *in, const char *want)
{
	struct dg_cpuset s;
	char out[128];

	assert_int_equal(cpulist_parse(in, &s), 0);
	cpulist_format(&s, out, sizeof(out));
	assert_string_equal(out, want);
}

static void test_cpulist(void **state)
{
	struct dg_cpuset s;

	(void)state;
	roundtrip("0-3,8,10-11\n", "0-3,8,10-11");
	roundtrip("5", "5");
	roundtrip("1,2,3", "1-3");
	roundtrip("\n", "");
	roundtrip("1023", "1023");
	assert_true(cpulist_parse("", &s) == 0 && cpuset_empty(&s));
	assert_int_equal(cpulist_parse("3-1", &s), -EINVAL);
	assert_int_equal(cpulist_parse("1024", &s), -ERANGE);
	assert_int_equal(cpulist_parse("a", &s), -EINVAL);
	assert_int_equal(cpulist_parse("1;2", &s), -EINVAL);
	assert_int_equal(cpulist_parse("1,-2", &s), -EINVAL);
	assert_int_equal(cpulist_parse("1\n2", &s), -EINVAL);
}

static void write_file(const char *dir, const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A host root with node0 = CPUs 0-1 and node1 = CPUs 2-3. */
static void make_host(char *dir)
{
	char path[512];

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path),
		 "mkdir -p %s/sys/devices/system/node/node0 "
		 "%s/sys/devices/system/node/node1",
		 dir, dir);
	assert_int_equal(system(path), 0);
	write_file(dir, "sys/devices/system/node/node0/cpulist", "0-1\n");
	write_file(dir, "sys/devices/system/node/node1/cpulist", "2-3\n");
	write_file(dir, "sys/devices/system/node/online", "0-1\n");
}

static void expect_where(const struct dg_numa *n, const char *cpus, int node, const char *where)
{
	struct dg_cpuset s;
	struct alloc_cpus ret;

	assert_int_equal(cpulist_parse(cpus, &s), 0);
	topo_describe(n, &s, "", &ret);
	assert_int_equal(ret.node, node);
	assert_string_equal(ret.where, where);
}

static void test_nodes(void **state)
{
	char dir[] = "/tmp/dg-numa-XXXXXX", cmd[600];
	struct dg_numa n;

	(void)state;
	make_host(dir);
	assert_int_equal(numa_read(dir, &n), 0);
	assert_int_equal(n.n_present, 2);
	expect_where(&n, "0-1", 0, "the container's CPUs (0-1) are on node 0");
	expect_where(&n, "3", 1, "the container's CPUs (3) are on node 1");
	expect_where(&n, "1-2", -1, "the container's CPUs (1-2) span nodes 0,1, no preference");
	expect_where(&n, "7", -1, "the container's CPUs (7) are on no NUMA node the host lists");
	/* Only the nodes online count. */
	write_file(dir, "sys/devices/system/node/online", "1\n");
	assert_int_equal(numa_read(dir, &n), 0);
	assert_int_equal(n.n_present, 1);
	expect_where(&n, "0", -1, "the container's CPUs (0) are on no NUMA node the host lists");
	expect_where(&n, "2-3", 1, "the container's CPUs (2-3) are on node 1");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	/* No node directory: nothing present, and no error. */
	assert_int_equal(numa_read("/nonexistent-dg", &n), -ENOENT);
	assert_int_equal(numa_read("/tmp", &n), 0);
	assert_int_equal(n.n_present, 0);
}

/* The cgroup's cpuset wins; without one, the process's affinity, said so. */
static void test_container_cpus(void **state)
{
	char dir[] = "/tmp/dg-numa-XXXXXX", cg[600], cmd[700];
	struct target t = TARGET_INIT;
	struct alloc_cpus c;

	(void)state;
	make_host(dir);
	snprintf(cg, sizeof(cg), "%s/cg", dir);
	assert_int_equal(mkdir(cg, 0755), 0);
	t.cgfd = open(cg, O_PATH | O_DIRECTORY);
	t.pid = getpid();
	assert_true(t.cgfd >= 0);
	topo_container_cpus(dir, &t, &c);
	assert_non_null(strstr(c.where, ", by affinity: no cpuset controller)"));
	write_file(dir, "cg/cpuset.cpus.effective", "2-3\n");
	topo_container_cpus(dir, &t, &c);
	assert_int_equal(c.node, 1);
	assert_string_equal(c.where, "the container's CPUs (2-3) are on node 1");
	/* A host without NUMA nodes in sysfs: no preference, said so. */
	topo_container_cpus("/nonexistent-dg", &t, &c);
	assert_int_equal(c.node, -1);
	assert_string_equal(c.where, "the host lists no NUMA nodes");
	close(t.cgfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpulist),
		cmocka_unit_test(test_nodes),
		cmocka_unit_test(test_container_cpus),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
