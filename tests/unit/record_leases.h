/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The leases the record tests write and read: each built field by field,
 * with fixed times, so the JSON written for them is the same every run.
 */
#ifndef DEVGATE_TEST_RECORD_LEASES_H
#define DEVGATE_TEST_RECORD_LEASES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devgate.h"
#include "driver.h"
#include "lease/lease.h"

/* An NVIDIA GPU held alone, no label: the most common record. */
static inline struct lease *record_lease_plain(void)
{
	struct lease *l = lease_new(4242);

	l->cgroup = strdup("/system.slice/docker-3f2a5c.scope");
	l->pid = 1234;
	l->since = 1795276298;
	l->gpus = calloc(1, sizeof(*l->gpus));
	l->n_gpus = 1;
	snprintf(l->gpus[0].uuid, sizeof(l->gpus[0].uuid), "GPU-0b3c8f2e");
	l->gpus[0].minor = 0;
	l->gpus[0].since_ms = 1795276298000;
	return l;
}

/* Host devices only, no GPU: char and block, one with an access mode. */
static inline struct lease *record_lease_devices(void)
{
	struct lease *l = lease_new(18446744073709551557ull);

	l->cgroup = strdup("/c");
	l->container = strdup("web");
	l->pid = 77;
	l->since = 1700000000;
	l->devices = calloc(2, sizeof(*l->devices));
	l->n_devices = 2;
	l->devices[0] = (struct lease_device){
		.name = "loop-control", .host = "/dev/loop-control", .major = 10, .minor = 237
	};
	l->devices[1] = (struct lease_device){ .name = "disk",
					       .host = "/dev/loop7",
					       .major = 7,
					       .minor = 7,
					       .access = DG_ACC_READ,
					       .block = true };
	return l;
}

/*
 * Every field of every record struct set to a value other than its default:
 * an AMD GPU with its card node, a shared NVIDIA GPU, a MIG instance with its
 * capability nodes; GPU time held and spent; devices; an expiry; the driver's
 * files; the majors; a root (grant --root) and the nodes the lease kept.
 */
static inline struct lease *record_lease_full(void)
{
	struct lease *l = lease_new(987654321);
	struct lease_gpu *g;

	l->cgroup = strdup("/kubepods/pod1/cri-containerd-ff00");
	l->container = strdup("trainer");
	l->pid = 31337;
	l->since = 1795276298;
	l->gpus = calloc(3, sizeof(*l->gpus));
	l->n_gpus = 3;
	g = &l->gpus[0];
	snprintf(g->uuid, sizeof(g->uuid), "0000:90:00.0");
	g->family = DG_VENDOR_AMD;
	g->minor = 129;
	g->card = true;
	g->card_minor = 1;
	g->since_ms = 1795276300123;
	g->ms = 4500;
	g = &l->gpus[1];
	snprintf(g->uuid, sizeof(g->uuid), "GPU-1111");
	g->minor = 3;
	g->shared = true;
	g->since_ms = 1795276301000;
	g = &l->gpus[2];
	snprintf(g->uuid, sizeof(g->uuid), "GPU-2222");
	g->minor = 5;
	g->instance = true;
	g->gi = 2;
	g->n_caps = 3;
	g->caps[0] = 21;
	g->caps[1] = 22;
	g->caps[2] = 23;
	g->since_ms = 1795276302000;
	g->ms = 1;
	l->spent = calloc(2, sizeof(*l->spent));
	l->n_spent = 2;
	snprintf(l->spent[0].uuid, sizeof(l->spent[0].uuid), "GPU-gone");
	l->spent[0].ms = 600000;
	snprintf(l->spent[1].uuid, sizeof(l->spent[1].uuid), "GPU-idle");
	l->devices = calloc(2, sizeof(*l->devices));
	l->n_devices = 2;
	l->devices[0] = (struct lease_device){
		.name = "myfull", .host = "/dev/full", .major = 1, .minor = 7, .access = 7
	};
	l->devices[1] = (struct lease_device){
		.name = "sdb", .host = "/dev/sdb", .major = 8, .minor = 16, .block = true
	};
	l->expires = 1795279898;
	l->kill_on_expiry = true;
	l->driver_caps = DG_DRV_COMPUTE | DG_DRV_UTILITY;
	l->driver_files = calloc(2, sizeof(*l->driver_files));
	l->n_driver_files = 2;
	snprintf(l->driver_files[0].path, sizeof(l->driver_files[0].path),
		 "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14");
	snprintf(l->driver_files[1].path, sizeof(l->driver_files[1].path), "/usr/bin/nvidia-smi");
	l->driver_dirs = calloc(2, sizeof(*l->driver_dirs));
	l->n_driver_dirs = 2;
	snprintf(l->driver_dirs[0].path, sizeof(l->driver_dirs[0].path),
		 "/usr/lib/x86_64-linux-gnu");
	l->driver_dirs[0].ino = 18446744073709551000ULL;
	snprintf(l->driver_dirs[1].path, sizeof(l->driver_dirs[1].path), "/usr/bin");
	l->driver_dirs[1].ino = 77;
	l->has_majors = true;
	l->majors = (struct dg_majors){ .has_nvidia = true,
					.nvidia = 195,
					.has_uvm = true,
					.uvm = 507,
					.has_kfd = true,
					.kfd = 235,
					.has_caps = true,
					.caps = 506 };
	l->root = strdup("/run/containerd/ff00/rootfs");
	l->root_dev = 18446744073709551615ull;
	l->root_ino = 131077;
	l->kept = calloc(2, sizeof(*l->kept));
	l->n_kept = 2;
	snprintf(l->kept[0].path, sizeof(l->kept[0].path), "/dev/myfull");
	snprintf(l->kept[1].path, sizeof(l->kept[1].path), "/dev/dri/renderD129");
	return l;
}

/*
 * The edges of the optional keys: an expiry without kill_on_expiry, driver
 * capabilities without files yet, the majors of a host without a driver (an
 * empty object), and a GPU in a record from before accounting (no time).
 */
static inline struct lease *record_lease_edges(void)
{
	struct lease *l = lease_new(55);

	l->cgroup = strdup("/edges");
	l->since = 1600000000;
	l->gpus = calloc(1, sizeof(*l->gpus));
	l->n_gpus = 1;
	snprintf(l->gpus[0].uuid, sizeof(l->gpus[0].uuid), "GPU-e");
	l->gpus[0].family = DG_VENDOR_INTEL;
	l->gpus[0].minor = 128;
	l->expires = 1600003600;
	l->driver_caps = DG_DRV_GRAPHICS;
	l->has_majors = true;
	return l;
}

#endif
