/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error codes shared by daemon, CLI and hook.
 *
 * Each code has a stable wire name (sent in replies) and a stable process
 * exit code (documented in devgatectl(8)). Internally functions still return
 * negative errno; struct dg_error carries the user-facing part.
 */
#ifndef DEVGATE_ERRORS_H
#define DEVGATE_ERRORS_H

#include <stdbool.h>
#include <json-c/json.h>

enum dg_code {
	DG_OK = 0,
	DG_E_INTERNAL,
	DG_E_INVALID,
	DG_E_UNREACHABLE,
	DG_E_PERM,
	DG_E_NO_TARGET,
	DG_E_TARGET_UNSUPPORTED,
	DG_E_NO_GPU,
	DG_E_UNAVAILABLE,
	DG_E_NODE_CONFLICT,
	DG_E_NOT_GRANTED,
	DG_E_KERNEL,
	DG_E_PROTOCOL,
	DG_E_STATE,
	DG_E_CONFIG,
	DG_E_HOOK,
	DG_E_CHECK,
	DG_E_UNPROVEN,
	DG_CODE_MAX,
};

struct dg_code_info {
	const char *name;    /* wire name, e.g. "gpu_unavailable" */
	int exit_code;	     /* process exit status */
	const char *summary; /* one line, for --help and man pages */
};

const struct dg_code_info *dg_code_info(enum dg_code code);
int dg_code_from_name(const char *name, enum dg_code *ret);

#define DG_ERRMSG_MAX 1024
#define DG_HINT_MAX 512

struct dg_error {
	enum dg_code code;
	int errnum; /* positive errno behind it, 0 if none */
	char message[DG_ERRMSG_MAX];
	char hint[DG_HINT_MAX];
};

/*
 * Record an error. Returns -errnum (or -EINVAL when errnum is 0) so callers
 * can write `return dg_error_set(err, ...);`. err may be NULL.
 */
int dg_error_set(struct dg_error *err, enum dg_code code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void dg_error_hint(struct dg_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
bool dg_error_is_set(const struct dg_error *err);
/* err's hint, or the default one of its code; NULL when there is none. */
const char *dg_error_hint_text(const struct dg_error *err);

/* {"code": NAME, "message": ..., "hint": ...} */
json_object *dg_error_to_json(const struct dg_error *err);
/* Fills err from a reply's "error" object; unknown codes map to internal. */
void dg_error_from_json(json_object *obj, struct dg_error *err);

#endif
