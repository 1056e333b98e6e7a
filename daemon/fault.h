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

#endif
