// SPDX-License-Identifier: Apache-2.0
/*
 * Drops devgate-k8s to its --user and --group with CAP_DAC_OVERRIDE alone
 * (see privs.h). Called once, before any thread starts.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "privs.h"
#include "util.h"

static int fail(int e, char *why, size_t why_len, const char *what, const char *name)
{
	snprintf(why, why_len, "%s%s%s: %s", what, name ? " " : "", name ? name : "", strerror(e));
	return -e;
}

static int lookup_user(const char *user, struct passwd **ret)
{
	uint32_t id;

	errno = 0;
	*ret = getpwnam(user);
	if (!*ret && parse_u32(user, &id) == 0)
		*ret = getpwuid(id);
	return *ret ? 0 : -(errno ? errno : ESRCH);
}

static int lookup_group(const char *group, gid_t *ret)
{
	struct group *gr;
	uint32_t id;

	errno = 0;
	gr = getgrnam(group);
	if (gr) {
		*ret = gr->gr_gid;
		return 0;
	}
	if (parse_u32(group, &id) == 0) {
		*ret = id; /* a gid need not have a name */
		return 0;
	}
	return -(errno ? errno : ESRCH);
}

/* Only CAP_DAC_OVERRIDE in every set that matters; the bounding set too. */
static int keep_dac_override(char *why, size_t why_len)
{
	cap_value_t keep = CAP_DAC_OVERRIDE;
	cap_t caps = cap_init();
	int r = 0;

	if (!caps)
		return fail(errno, why, why_len, "cap_init", NULL);
	if (cap_set_flag(caps, CAP_PERMITTED, 1, &keep, CAP_SET) < 0 ||
	    cap_set_flag(caps, CAP_EFFECTIVE, 1, &keep, CAP_SET) < 0 || cap_set_proc(caps) < 0)
		r = fail(errno, why, why_len, "cannot keep CAP_DAC_OVERRIDE alone", NULL);
	cap_free(caps);
	return r;
}

static int drop_bounding(char *why, size_t why_len)
{
	for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
		/* Not there (a container's bounding set): nothing to drop. */
		if (c == CAP_DAC_OVERRIDE || prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 0)
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return fail(errno, why, why_len,
				    "cannot drop a capability from the bounding set", NULL);
	}
	return 0;
}

int k8s_drop_privileges(const char *user, const char *group, char *why, size_t why_len)
{
	struct passwd *pw = NULL;
	uid_t uid = getuid();
	gid_t gid = getgid();
	int r;

	if (user) {
		r = lookup_user(user, &pw);
		if (r < 0)
			return fail(-r, why, why_len, "unknown user", user);
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	}
	if (group) {
		r = lookup_group(group, &gid);
		if (r < 0)
			return fail(-r, why, why_len, "unknown group", group);
	}
	if (geteuid() != 0) {
		/* Nothing to drop; only say so when asked for someone else. */
		if (uid != geteuid() || gid != getegid())
			return fail(EPERM, why, why_len, "changing user or group needs root", NULL);
		return 0;
	}
	r = drop_bounding(why, why_len);
	if (r < 0)
		return r;
	if (pw || group) {
		if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
			return fail(errno, why, why_len, "PR_SET_KEEPCAPS", NULL);
		if (pw ? initgroups(pw->pw_name, gid) < 0 : setgroups(0, NULL) < 0)
			return fail(errno, why, why_len, "cannot set the supplementary groups of",
				    pw ? pw->pw_name : "root");
		if (setresgid(gid, gid, gid) < 0)
			return fail(errno, why, why_len, "setresgid", NULL);
		if (setresuid(uid, uid, uid) < 0)
			return fail(errno, why, why_len, "setresuid", NULL);
		(void)prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	}
	r = keep_dac_override(why, why_len);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(errno, why, why_len, "PR_SET_NO_NEW_PRIVS", NULL);
	/* Proof: no way back. */
	if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
		return fail(EPERM, why, why_len, "could regain root after dropping it", NULL);
	return 0;
}
