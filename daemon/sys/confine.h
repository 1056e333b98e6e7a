/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Seccomp filters for devgated and its node helper, built with libseccomp
 * in one place. devgated installs its own allow-list once, at the end of
 * start-up: after it dropped capabilities, loaded its BPF objects and
 * opened its sockets. A call outside the list fails with EPERM (mode "on")
 * or is logged by the kernel and let through (mode "log", to find missing
 * entries). Calls that would only serve an attacker (execve, ptrace,
 * mount, module loading, ...) kill the process in both modes.
 */
#ifndef DEVGATE_CONFINE_H
#define DEVGATE_CONFINE_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

enum dg_seccomp_mode {
	DG_SECCOMP_ON = 0, /* the default */
	DG_SECCOMP_LOG,
	DG_SECCOMP_OFF,
};

/* "on", "log" or "off"; -EINVAL for anything else. */
int confine_mode_parse(const char *s, int *mode);
const char *confine_mode_name(int mode);

/*
 * A filter in kernel form: the calls in allow[] pass, those in kill[] kill
 * the process, any other gets dflt (an SCMP_ACT_* value). The caller frees
 * prog->filter. A forked child can install it without allocating.
 */
int confine_build(uint32_t dflt, const int *allow, size_t n_allow, const int *kill, size_t n_kill,
		  struct sock_fprog *prog, struct dg_error *err);

/* Installs devgated's filter; DG_SECCOMP_OFF installs nothing. */
int confine_daemon(int mode, struct dg_error *err);

/* Whether devgated runs under its filter: mount(2) is then fatal. */
bool confine_active(void);

/*
 * In a single-threaded process: from now on kill, tkill and tgkill reach
 * only the process itself (abort() and raise() still work); a signal to
 * any other fails with EPERM (mode "log": is logged). For code that keeps
 * the uid of root processes it must not signal (the NVML probe's
 * children). Returns 0 or a negative errno.
 */
int confine_own_signals(int mode);

#endif
