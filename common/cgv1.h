/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v1 devices as text: a process's line in /proc/PID/cgroup, and
 * devices.list rules (the hierarchy's mount: mountinfo.h). Parsing
 * only; shared by devgated (sys/cgroup1.c, gate/devlist.c) and devgatectl
 * doctor.
 */
#ifndef DEVGATE_CGV1_H
#define DEVGATE_CGV1_H

#include <stddef.h>
#include <stdint.h>

#define CGV1_ANY UINT32_MAX /* '*' in a rule */

/* A devices.list line: "c 195:0 rw". */
struct cgv1_rule {
	char type;	       /* 'a', 'b' or 'c' */
	uint32_t major, minor; /* CGV1_ANY: '*' */
	uint32_t acc;	       /* DG_ACC_* bits */
};

/* The path of the /proc/PID/cgroup line whose controllers include devices; -ENOMEDIUM if none. */
int cgv1_devices_parse(const char *text, char **ret);
/* Parses one rule of len bytes; -EINVAL when it is not one. */
int cgv1_rule_parse(const char *s, size_t len, struct cgv1_rule *r);
/* The DG_ACC_* bits a devices.list text allows the device; -EINVAL on a bad line. */
int cgv1_list_access(const char *list, char type, uint32_t major, uint32_t minor);

#endif
