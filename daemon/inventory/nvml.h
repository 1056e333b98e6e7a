/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MIG profile names and MIG UUIDs, which only NVML knows. devgated never
 * loads libnvidia-ml itself: a probe process, forked before the seccomp
 * filter, stripped of every capability and under an allow-list of its
 * own, forks a child per question that
 * dlopens the host's library, asks, prints lines and exits. A hang or crash
 * there costs one answer, not the daemon.
 */
#ifndef DEVGATE_NVML_H
#define DEVGATE_NVML_H

#include "gpu.h"

/*
 * Forks the probe process, before confine_daemon(), under an allow-list
 * of its own in seccomp_mode (DG_SECCOMP_*, devgated's --seccomp).
 * Returns 0 or a negative errno (logged).
 */
int nvml_start(int seccomp_mode);
void nvml_stop(void);
/*
 * Reaps a probe that died (killed, out of memory), logs how, and starts a
 * new one (at most every 10 s); nothing when it runs. From the periodic
 * check, and before each question.
 */
void nvml_check(void);

/*
 * Fills the profile names and MIG UUIDs of inv's MIG instances, or says in
 * inv->nvml_problem why not. Asks only when some GPU has MIG instances and
 * their layout differs from old's (the inventory before a rescan; or NULL).
 */
void nvml_fill(struct dg_inventory *inv, const struct dg_inventory *old);

/*
 * Parses the probe's lines into inv ("mi GPU-UUID GI CI MIG-UUID PROFILE",
 * "err TEXT"); 0, or -EINVAL with the problem in inv->nvml_problem.
 */
int nvml_parse(const char *text, struct dg_inventory *inv);

#endif
