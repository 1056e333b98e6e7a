// SPDX-License-Identifier: Apache-2.0
/*
 * lxcload: LXC's device hot-plug, timed in one C process, the peer's side
 * of what bench/dgload does for devgate (one client, no process start per
 * call, no interpreter).
 *
 *   lxcload -P LXCPATH [-n N] [-a] NAME NODE
 *
 * Runs N cycles of liblxc's add_device_node(NODE) then
 * remove_device_node(NODE) on the running container NAME, the calls that
 * `lxc-device add` and `lxc-device del` make, on one lxc_container made
 * once. NODE must exist on the host at the path it is to have in the
 * container (liblxc checks it). Prints one line per call:
 *   add <ns>     or     del <ns>
 * With -a, one add and no remove (to check from inside what it gave).
 * Exits 1 at the first call that fails. It must not change the container's
 * configuration otherwise: LXC's defaults are what is measured.
 *
 * Why C: liblxc forks its caller to make the node inside the container, and
 * a python3 caller's fork and exit cost more than a small C process's
 * (bench/NOTES.md); dgload is C too.
 */
#include <getopt.h>
#include <lxc/lxccontainer.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int usage(void)
{
	fprintf(stderr, "usage: lxcload -P LXCPATH [-n N] [-a] NAME NODE\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *lxcpath = NULL;
	unsigned long cycles = 200;
	struct lxc_container *c;
	long long *took;
	unsigned long done = 0;
	bool add_only = false;
	int opt, rc = 0;

	while ((opt = getopt(argc, argv, "P:n:a")) != -1) {
		if (opt == 'P')
			lxcpath = optarg;
		else if (opt == 'a')
			add_only = true;
		else if (opt == 'n')
			cycles = strtoul(optarg, NULL, 10);
		else
			return usage();
	}
	if (!lxcpath || argc - optind != 2 || cycles == 0 || cycles > 1000000)
		return usage();
	if (add_only)
		cycles = 1;
	const char *name = argv[optind], *node = argv[optind + 1];

	/* Printed at the end: liblxc forks this process, with its stdio. */
	took = calloc(2 * cycles, sizeof(*took));
	if (!took)
		return 1;
	c = lxc_container_new(name, lxcpath);
	if (!c || !c->is_running(c)) {
		fprintf(stderr, "lxcload: container '%s' is not running\n", name);
		if (c)
			lxc_container_put(c);
		free(took);
		return 1;
	}
	for (unsigned long i = 0; i < cycles; i++) {
		long long t0 = now_ns();
		bool ok = c->add_device_node(c, node, NULL);
		long long t1 = now_ns();

		if (!ok) {
			fprintf(stderr, "lxcload: add of '%s' failed\n", node);
			rc = 1;
			break;
		}
		took[done++] = t1 - t0;
		if (add_only)
			break;
		ok = c->remove_device_node(c, node, NULL);
		t0 = now_ns();
		if (!ok) {
			fprintf(stderr, "lxcload: del of '%s' failed\n", node);
			rc = 1;
			break;
		}
		took[done++] = t0 - t1;
	}
	lxc_container_put(c);
	for (unsigned long i = 0; i < done; i++)
		printf("%s %lld\n", i % 2 ? "del" : "add", took[i]);
	free(took);
	return rc;
}
