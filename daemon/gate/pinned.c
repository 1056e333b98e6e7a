// SPDX-License-Identifier: Apache-2.0
/*
 * The pins of per-cgroup copies: PIN_ROOT/cg/CGID/gate-ORIG (a gate for
 * runtime program ORIG), slot-ORIG (its prog array, whose pin keeps the
 * tail call alive), gate-default and tally. Reading them back into struct
 * pinned, pinning and unpinning.
 *
 * Pins only: it attaches nothing and never asks the kernel what is attached
 * (guard.c does), and knows nothing of the shared programs (onegate.c).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "cleanup.h"
#include "log.h"
#include "pinned.h"
#include "util.h"

int pinned_dir(const char *pin_root, uint64_t cgid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/cg/%llu", pin_root, (unsigned long long)cgid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int pinned_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int prog_id_of(int fd, uint32_t *ret)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return -errno;
	*ret = info.id;
	return 0;
}

/* What a pin's name says it is; -EINVAL for slot-* pins and strangers. */
static int parse_pin_name(const char *name, enum pin_kind *kind, uint32_t *orig)
{
	if (strcmp(name, "tally") == 0) {
		*kind = PIN_TALLY;
		return 0;
	}
	if (strcmp(name, "gate-default") == 0) {
		*kind = PIN_DEFAULT;
		return 0;
	}
	if (startswith(name, "gate-") && parse_u32(name + 5, orig) == 0) {
		*kind = PIN_GATE;
		return 0;
	}
	return -EINVAL;
}

int pinned_read_dir(const char *dir, struct pinned *out, size_t max, size_t *ret_n)
{
	auto_closedir DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return errno == ENOENT ? (*ret_n = 0, 0) : -errno;
	while ((de = readdir(d))) {
		struct pinned p = { 0 };
		char path[PATH_MAX];
		auto_close int fd = -1;

		if (parse_pin_name(de->d_name, &p.kind, &p.orig_id) < 0 || n == max)
			continue;
		if (pinned_path(path, sizeof(path), dir, de->d_name) < 0)
			continue;
		fd = bpf_obj_get(path);
		if (fd < 0 || prog_id_of(fd, &p.id) < 0)
			continue;
		out[n++] = p;
	}
	*ret_n = n;
	return 0;
}

const struct pinned *pinned_find(const struct pinned *pins, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (pins[i].id == id)
			return &pins[i];
	}
	return NULL;
}

const struct pinned *pinned_gate_for(const struct pinned *pins, size_t n, uint32_t orig_id)
{
	for (size_t i = 0; i < n; i++) {
		if (pins[i].kind == PIN_GATE && pins[i].orig_id == orig_id)
			return &pins[i];
	}
	return NULL;
}

int pinned_pin(int fd, const char *dir, const char *name)
{
	char path[PATH_MAX];
	int r = pinned_path(path, sizeof(path), dir, name);

	if (r < 0)
		return r;
	(void)unlink(path); /* a stale pin of a program no longer attached */
	return bpf_obj_pin(fd, path) < 0 ? -errno : 0;
}

void pinned_unpin_name(const char *dir, const char *name)
{
	char path[PATH_MAX];

	if (pinned_path(path, sizeof(path), dir, name) == 0 && unlink(path) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot remove pin %s: %m", path);
}

void pinned_unpin(const char *dir, const struct pinned *p)
{
	char name[64];

	if (p->shared)
		return;
	switch (p->kind) {
	case PIN_TALLY:
		pinned_unpin_name(dir, "tally");
		break;
	case PIN_DEFAULT:
		pinned_unpin_name(dir, "gate-default");
		break;
	case PIN_GATE:
		snprintf(name, sizeof(name), "gate-%u", p->orig_id);
		pinned_unpin_name(dir, name);
		snprintf(name, sizeof(name), "slot-%u", p->orig_id);
		pinned_unpin_name(dir, name);
		break;
	case PIN_BESIDE: /* shared only: no pin per cgroup */
	case PIN_MARK:
		break;
	}
}
