// SPDX-License-Identifier: Apache-2.0
/*
 * The table of error codes: each code's wire name, exit status and default
 * hint, and the setters that fill struct dg_error. The one place an exit
 * status is tied to a code.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"

/* Exit codes are part of the interface: never renumber, only append. */
static const struct dg_code_info code_table[DG_CODE_MAX] = {
	[DG_OK] = { "ok", 0, "success" },
	[DG_E_INTERNAL] = { "internal", 1, "unexpected internal failure" },
	[DG_E_INVALID] = { "invalid", 2, "bad command line, request or input" },
	[DG_E_UNREACHABLE] = { "daemon_unreachable", 3,
			       "devgated is not running or not reachable" },
	[DG_E_PERM] = { "permission_denied", 4,
			"caller lacks the authority (not root, or a device devgate.conf does not allow)" },
	[DG_E_NO_TARGET] = { "no_such_target", 5, "the PID, container or cgroup does not exist" },
	[DG_E_TARGET_UNSUPPORTED] = { "target_unsupported", 6,
				      "target is not in a usable cgroup v2 cgroup" },
	[DG_E_NO_GPU] = { "no_such_gpu", 7, "the GPU selector matches no GPU on this host" },
	[DG_E_UNAVAILABLE] = { "gpu_unavailable", 8, "the requested GPUs are not free" },
	[DG_E_NODE_CONFLICT] = { "node_conflict", 9,
				 "a device node path in the container holds something else" },
	[DG_E_NOT_GRANTED] = { "not_granted", 10, "the container does not hold that GPU" },
	[DG_E_KERNEL] = { "kernel", 11, "a cgroup, BPF or namespace operation failed" },
	[DG_E_PROTOCOL] = { "protocol", 12, "malformed message or protocol version mismatch" },
	[DG_E_STATE] = { "state", 13, "the state directory is unreadable or corrupt" },
	[DG_E_CONFIG] = { "config", 14, "the configuration file is invalid" },
	[DG_E_HOOK] = { "hook", 15, "the OCI hook could not serve the container" },
	/* Shares 1 with internal: doctor exited 1 on a failed check before codes existed. */
	[DG_E_CHECK] = { "check_failed", 1, "doctor: at least one check failed" },
	[DG_E_UNPROVEN] = { "not_delivered", 16,
			    "the grant did not reach the device inside the container: rolled back" },
};

const struct dg_code_info *dg_code_info(enum dg_code code)
{
	if ((int)code < 0 || code >= DG_CODE_MAX)
		code = DG_E_INTERNAL;
	return &code_table[code];
}

int dg_code_from_name(const char *name, enum dg_code *ret)
{
	for (int i = 0; i < DG_CODE_MAX; i++) {
		if (strcmp(code_table[i].name, name) == 0) {
			*ret = (enum dg_code)i;
			return 0;
		}
	}
	return -ENOENT;
}

int dg_error_set(struct dg_error *err, enum dg_code code, int errnum, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		va_list ap;

		err->code = code;
		err->errnum = errnum;
		err->hint[0] = '\0';
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return errnum ? -errnum : -EINVAL;
}

void dg_error_hint(struct dg_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
	va_end(ap);
}

/* What to do next, for errors whose maker had nothing more specific to say. */
static const char *const default_hints[DG_CODE_MAX] = {
	[DG_E_INTERNAL] = "devgated's log says more: journalctl -u devgated",
	[DG_E_INVALID] = "see 'devgatectl --help' and devgatectl(8)",
	[DG_E_UNREACHABLE] = "is devgated running? 'systemctl status devgated'",
	[DG_E_PERM] = "run it as root (or as a member of devgated's admin group)",
	[DG_E_NO_TARGET] = "name a running process of the container (host PID), its cgroup, "
			   "or a label 'devgatectl status' shows",
	[DG_E_TARGET_UNSUPPORTED] = "devgate serves processes in a container's own cgroup v2 "
				    "cgroup; 'devgatectl doctor' checks the host",
	[DG_E_NO_GPU] = "run 'devgatectl list' to see this host's GPUs",
	[DG_E_UNAVAILABLE] = "'devgatectl list' shows who holds each GPU",
	[DG_E_NODE_CONFLICT] = "something else occupies that path in the container's /dev",
	[DG_E_NOT_GRANTED] = "'devgatectl status' shows what each container holds",
	[DG_E_KERNEL] = "'devgatectl doctor' checks cgroup v2, bpffs and BPF device programs",
	[DG_E_PROTOCOL] = "devgatectl, devgate-hook and devgated must come from one release",
	[DG_E_STATE] = "devgated's log names the file; check the state directory's space and "
		       "permissions",
	[DG_E_CONFIG] =
		"devgate.conf(5) lists the keys; 'devgated --check-config' shows the result",
	[DG_E_HOOK] = "the runtime's log shows the hook's message; devgate-hook(8) says what "
		      "it reads",
	[DG_E_CHECK] = "each failed check above carries its own hint",
	[DG_E_UNPROVEN] = "the message names the layer that still denies the device",
};

const char *dg_error_hint_text(const struct dg_error *err)
{
	if (err->hint[0])
		return err->hint;
	if ((int)err->code > 0 && err->code < DG_CODE_MAX && default_hints[err->code])
		return default_hints[err->code];
	return NULL;
}

bool dg_error_is_set(const struct dg_error *err)
{
	return err && err->code != DG_OK;
}

json_object *dg_error_to_json(const struct dg_error *err)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "code", json_object_new_string(dg_code_info(err->code)->name));
	json_object_object_add(o, "message", json_object_new_string(err->message));
	if (dg_error_hint_text(err))
		json_object_object_add(o, "hint", json_object_new_string(dg_error_hint_text(err)));
	if (err->errnum)
		json_object_object_add(o, "errno", json_object_new_int(err->errnum));
	return o;
}

void dg_error_from_json(json_object *obj, struct dg_error *err)
{
	json_object *v;
	enum dg_code code = DG_E_INTERNAL;

	memset(err, 0, sizeof(*err));
	if (json_object_object_get_ex(obj, "code", &v) && json_object_is_type(v, json_type_string))
		(void)dg_code_from_name(json_object_get_string(v), &code);
	err->code = code == DG_OK ? DG_E_INTERNAL : code;
	if (json_object_object_get_ex(obj, "message", &v))
		snprintf(err->message, sizeof(err->message), "%s", json_object_get_string(v));
	else
		snprintf(err->message, sizeof(err->message), "error without a message");
	if (json_object_object_get_ex(obj, "hint", &v))
		snprintf(err->hint, sizeof(err->hint), "%s", json_object_get_string(v));
	if (json_object_object_get_ex(obj, "errno", &v))
		err->errnum = json_object_get_int(v);
}
