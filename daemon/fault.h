/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fault points for crash tests: DEVGATE_FAULT=NAME[:N] makes devgated kill
 * itself with SIGKILL the Nth time (default 1st) it passes point NAME, so
 * a test can crash it between any two steps of a transaction and check
 * what the next start makes of it (tests/integration/faults.bats). Unset,
 * a fault point costs one pointer comparison.
 */
#ifndef DEVGATE_FAULT_H
#define DEVGATE_FAULT_H

/* Reads DEVGATE_FAULT once; logs the armed point. */
void fault_init(void);
void fault_point(const char *name);

/*
 * Test only (tests/integration/confinement.bats): DEVGATE_TEST_SECCOMP_PROBE
 * makes devgated, right after it installed its seccomp filter, make one call
 * the filter refuses:
 *   io_setup  io_setup(0, NULL), a call outside the allow-list, and logs
 *             "seccomp probe: io_setup: ERRNO". EPERM under the filter;
 *             EFAULT (or ENOSYS) without it.
 *   execve    execve("/bin/true"): the filter kills devgated with SIGSYS;
 *             without it, devgated becomes true(1) and exits 0.
 * Unset, nothing happens.
 */
void fault_seccomp_probe(void);

#endif
