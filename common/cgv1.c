// SPDX-License-Identifier: Apache-2.0
/*
 * cgroup v1 devices as text (see cgv1.h): a process's devices cgroup in
 * /proc/PID/cgroup, and what a devices.list allows. Parsing only: no file
 * is opened here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgv1.h"
#include "cleanup.h"
#include "devgate.h"
#include "mountinfo.h"
#include "util.h"

int cgv1_devices_parse(const char *text, char **ret)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;

		/* "ID:CONTROLLERS:PATH"; v2's "0::PATH" has no controllers. */
		if (c2 && mountinfo_list_has(c1 + 1, (size_t)(c2 - c1 - 1), "devices")) {
			size_t plen = len - (size_t)(c2 + 1 - line);

			if (plen == 0 || c2[1] != '/')
				return -EINVAL;
			*ret = strndup(c2 + 1, plen);
			return *ret ? 0 : -ENOMEM;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -ENOMEDIUM;
}

static int parse_num(const char *s, size_t len, uint32_t *ret)
{
	char buf[16];

	if (len == 1 && *s == '*') {
		*ret = CGV1_ANY;
		return 0;
	}
	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return parse_u32(buf, ret);
}

/* "c 195:0 rw" (the kernel's devices.list line); -EINVAL otherwise. */
int cgv1_rule_parse(const char *s, size_t len, struct cgv1_rule *r)
{
	const char *colon, *sp;

	if (len < 7 || !strchr("abc", s[0]) || s[1] != ' ')
		return -EINVAL;
	r->type = s[0];
	colon = memchr(s + 2, ':', len - 2);
	sp = colon ? memchr(colon, ' ', len - (size_t)(colon - s)) : NULL;
	if (!sp || parse_num(s + 2, (size_t)(colon - s - 2), &r->major) < 0 ||
	    parse_num(colon + 1, (size_t)(sp - colon - 1), &r->minor) < 0)
		return -EINVAL;
	r->acc = 0;
	for (const char *p = sp + 1; p < s + len; p++) {
		if (*p == 'r')
			r->acc |= DG_ACC_READ;
		else if (*p == 'w')
			r->acc |= DG_ACC_WRITE;
		else if (*p == 'm')
			r->acc |= DG_ACC_MKNOD;
		else
			return -EINVAL;
	}
	return r->acc ? 0 : -EINVAL;
}

/* The access bits list grants to the device (type, major, minor); -EINVAL on a bad line. */
int cgv1_list_access(const char *list, char type, uint32_t major, uint32_t minor)
{
	uint32_t acc = 0;

	for (const char *line = list; line && *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		struct cgv1_rule r;

		if (len && cgv1_rule_parse(line, len, &r) < 0)
			return -EINVAL;
		if (len && (r.type == 'a' || r.type == type) &&
		    (r.major == CGV1_ANY || r.major == major) &&
		    (r.minor == CGV1_ANY || r.minor == minor))
			acc |= r.acc;
		line = eol ? eol + 1 : NULL;
	}
	return (int)acc;
}
