/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgate-k8s runs as an ordinary user where it can: it reads devgated
 * through the socket-group, and of root's powers keeps CAP_DAC_OVERRIDE
 * alone, to reach kubelet's root-owned device-plugin directory and socket.
 * Call before any thread starts (gRPC's included): capabilities and ids
 * are per thread in the kernel.
 */
#ifndef DEVGATE_K8S_PRIVS_H
#define DEVGATE_K8S_PRIVS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * user, group: names or numbers; either may be NULL. With user, the
 * process takes its uid, its groups (initgroups) and group (or the user's
 * own); with group alone, that gid. As root, every capability except
 * CAP_DAC_OVERRIDE leaves the bounding, permitted and effective sets, and
 * no_new_privs is set. Returns 0 or -errno with why filled.
 */
int k8s_drop_privileges(const char *user, const char *group, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
