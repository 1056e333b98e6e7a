/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fault points for crash and race tests.
 *
 * DEVGATE_FAULT=NAME[:N] makes devgated kill itself with SIGKILL the Nth
 * time (default 1st) it passes point NAME, so a test can crash it between
 * any two steps of a transaction and check what the next start makes of it
 * (tests/integration/faults.bats).
 *
 * DEVGATE_FAULT=NAME:pause=MS makes it stop for MS milliseconds (at most
 * 60000) every time it passes NAME instead, logging "fault point NAME:
 * pausing" first, so a test can change the world in a window that is
 * otherwise too short to hit (a target exiting and its PID reused between
 * the request and the node step: attack.bats). The daemon serves nothing
 * while it pauses. Test use only.
 *
 * Unset, a fault point costs one comparison.
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
