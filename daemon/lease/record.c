// SPDX-License-Identifier: Apache-2.0
/*
 * Lease records: one schema table per struct that says how a lease is
 * written to the state directory and read back, and the few checks a record
 * must pass beyond its shape. This file only turns a lease into JSON and
 * back. It does not open files (state.c does), does not touch the lease
 * table, and does not hold on to the leases it reads.
 *
 * Compatibility lives in the tables, not in code. A key that older records
 * lack has a default ("type" absent means a char device). A value that
 * older records spell another way is read in that form too ("driver_files"
 * as one string). A key that a newer devgated wrote is skipped. Each
 * optional key is left out when unused, so records written here are the
 * JSON older versions wrote and read, and a downgrade keeps its leases.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "devgate.h"
#include "driver.h"
#include "record.h"
#include "schema.h"

#define RECORD_FORMAT 1
/* The value of since_ms in a record from before GPU time was kept: see record_check. */
#define SINCE_UNKNOWN (-1)

static const char *const vendor_names[] = { "nvidia", "amd", "intel", NULL };
_Static_assert(sizeof(vendor_names) / sizeof(vendor_names[0]) == DG_VENDORS + 1,
	       "a name for each enum dg_vendor, in its order (vendor_name())");
/* struct lease_device's block: false is "c", true is "b". */
static const char *const type_names[] = { "c", "b", NULL };

static const struct dg_field gpu_fields[] = {
	DG_FIELD("uuid", DG_F_CHARS, struct lease_gpu, uuid, .required = true),
	/* Left out for NVIDIA, the vendor of every GPU in records older than the key. */
	DG_FIELD("vendor", DG_F_ENUM, struct lease_gpu, family, .names = vendor_names,
		 .flags = DG_OMIT_DEF),
	/* Written only when the lease holds the GPU's card node (grant --card). */
	DG_FIELD_HAS("card", DG_F_INT, struct lease_gpu, card_minor, card,
		     .max = DG_DRM_RENDER_BASE - 1),
	/* Written only for a MIG instance: its GI, and its capability nodes' minors. */
	DG_FIELD_HAS("gi", DG_F_INT, struct lease_gpu, gi, instance, .max = 0xffff),
	DG_FIELD_INTS("caps", struct lease_gpu, caps, n_caps, .required = true, .with = "gi",
		      .max = 0xfffff),
	DG_FIELD("minor", DG_F_INT, struct lease_gpu, minor, .required = true,
		 .max = DG_DRM_MAX_MINOR),
	DG_FIELD("shared", DG_F_BOOL, struct lease_gpu, shared, .required = true),
	/* GPU time; records older than it have neither key. */
	DG_FIELD("since_ms", DG_F_INT, struct lease_gpu, since_ms, .max = INT64_MAX,
		 .def = SINCE_UNKNOWN),
	DG_FIELD("ms", DG_F_INT, struct lease_gpu, ms, .max = INT64_MAX),
};
static const struct dg_schema gpu_schema = DG_RECORD_SCHEMA("GPU", struct lease_gpu, gpu_fields);

static const struct dg_field spent_fields[] = {
	DG_FIELD("uuid", DG_F_CHARS, struct lease_spent, uuid, .required = true),
	DG_FIELD("ms", DG_F_INT, struct lease_spent, ms, .max = INT64_MAX),
};
static const struct dg_schema spent_schema =
	DG_RECORD_SCHEMA("spent GPU", struct lease_spent, spent_fields);

static const struct dg_field device_fields[] = {
	/* The node in the container: "/dev/" and its name (one component, see record_check). */
	DG_FIELD("path", DG_F_CHARS, struct lease_device, name, .required = true,
		 .prefix = "/dev/"),
	DG_FIELD("host", DG_F_CHARS, struct lease_device, host, .required = true),
	/* Records older than block devices lack it: char, the only type they held. */
	DG_FIELD("type", DG_F_ENUM, struct lease_device, block, .names = type_names),
	DG_FIELD("major", DG_F_INT, struct lease_device, major, .required = true, .max = 4095),
	DG_FIELD("minor", DG_F_INT, struct lease_device, minor, .required = true, .max = 1048575),
	/* DG_ACC_* bits; left out for read and write (0), as before grant --access. */
	DG_FIELD("access", DG_F_INT, struct lease_device, access, .flags = DG_OMIT_DEF,
		 .max = DG_ACC_MKNOD | DG_ACC_READ | DG_ACC_WRITE),
};
static const struct dg_schema device_schema =
	DG_RECORD_SCHEMA("device", struct lease_device, device_fields);

/* A directory grant --driver made: {"path": "/usr/lib", "ino": "1234"}. */
static const struct dg_field dir_fields[] = {
	DG_FIELD("path", DG_F_CHARS, struct lease_dir, path, .required = true),
	/* A string, as cgroup ids: an inode number may use all 64 bits. */
	DG_FIELD("ino", DG_F_ID, struct lease_dir, ino, .required = true),
};
static const struct dg_schema dir_schema =
	DG_RECORD_SCHEMA("driver directory", struct lease_dir, dir_fields);

/* Only the majors the driver had: {"nvidia": 195, "nvidia-uvm": 511, ...}. */
#define MAJOR(key, m, has) \
	DG_FIELD_HAS(key, DG_F_INT, struct dg_majors, m, has, .min = 1, .max = 4095)
static const struct dg_field majors_fields[] = {
	MAJOR("nvidia", nvidia, has_nvidia),
	MAJOR("nvidia-uvm", uvm, has_uvm),
	MAJOR("nvidia-caps", caps, has_caps),
	MAJOR("kfd", kfd, has_kfd),
};
#undef MAJOR
static const struct dg_schema majors_schema =
	DG_RECORD_SCHEMA("majors", struct dg_majors, majors_fields);

/* The identity of a lease's root (grant --root): decimal strings, as on the wire. */
struct record_root_id {
	uint64_t dev, ino;
};
static const struct dg_field root_id_fields[] = {
	DG_FIELD("dev", DG_F_ID, struct record_root_id, dev, .required = true),
	DG_FIELD("ino", DG_F_ID, struct record_root_id, ino, .required = true),
};
static const struct dg_schema root_id_schema =
	DG_RECORD_SCHEMA("root_id", struct record_root_id, root_id_fields);
_Static_assert(offsetof(struct lease, root_ino) == offsetof(struct lease, root_dev) + 8,
	       "root_dev and root_ino are read as one record_root_id");

/*
 * The keys after "gpus" are left out when unused (no spent GPU, no ttl, no
 * grant --driver, no majors recorded, no devices): such a record is the one
 * older versions wrote, and reads as it did.
 */
static const struct dg_field lease_fields[] = {
	DG_CONST("format", RECORD_FORMAT),
	/* A string: JSON numbers lose precision above 2^53 in many readers. */
	DG_FIELD("cgroup_id", DG_F_ID, struct lease, cgid, .required = true, .min = 1),
	DG_FIELD("cgroup", DG_F_STR, struct lease, cgroup, .required = true),
	/* true: cgroup_id and cgroup are of the v1 devices hierarchy (no v2 on the host). */
	DG_FIELD("cgroup_v1", DG_F_BOOL, struct lease, v1_keyed, .flags = DG_OMIT_DEF),
	/* null when the caller gave no label. */
	DG_FIELD("container", DG_F_STR, struct lease, container, .required = true,
		 .flags = DG_NULL),
	/* Absent when container is a label, not a runtime's name. */
	DG_FIELD("runtime", DG_F_STR, struct lease, runtime),
	DG_FIELD("pid", DG_F_INT, struct lease, pid, .required = true, .min = INT32_MIN,
		 .max = INT32_MAX),
	/* CLOCK_REALTIME seconds; in milliseconds too it must fit (record_check). */
	DG_FIELD("since", DG_F_INT, struct lease, since, .required = true, .max = INT64_MAX / 1000),
	DG_FIELD_N("gpus", DG_F_OBJS, struct lease, gpus, n_gpus, .required = true,
		   .sub = &gpu_schema, .max = DG_MAX_GPUS),
	DG_FIELD_N("spent", DG_F_OBJS, struct lease, spent, n_spent, .sub = &spent_schema,
		   .max = DG_MAX_GPUS),
	DG_FIELD("expires", DG_F_INT, struct lease, expires, .flags = DG_OMIT_DEF, .min = 1,
		 .max = INT64_MAX),
	DG_FIELD("kill_on_expiry", DG_F_BOOL, struct lease, kill_on_expiry, .required = true,
		 .with = "expires"),
	/* A newer devgated's capability bits are dropped, not refused. */
	DG_FIELD("driver_caps", DG_F_INT, struct lease, driver_caps, .flags = DG_OMIT_DEF | DG_MASK,
		 .max = DG_DRV_ALL),
	/* Container paths; records older than the array hold one string, a path a line. */
	DG_FIELD_N("driver_files", DG_F_STRS, struct lease, driver_files, n_driver_files,
		   .required = true, .with = "driver_caps", .elem = sizeof(struct lease_file),
		   .flags = DG_LINES),
	/*
	 * The directories made for them. Records older than it lack it (the
	 * directories stay, as they did), and older versions skip it.
	 */
	DG_FIELD_N("driver_dirs", DG_F_OBJS, struct lease, driver_dirs, n_driver_dirs,
		   .with = "driver_caps", .sub = &dir_schema,
		   .max = (int64_t)4 * DG_DRIVER_MAX_FILES),
	/* Records older than a live driver reload lack it: has_majors stays false. */
	DG_FIELD_HAS("majors", DG_F_OBJ, struct lease, majors, has_majors, .sub = &majors_schema),
	DG_FIELD_N("devices", DG_F_OBJS, struct lease, devices, n_devices, .sub = &device_schema,
		   .max = DG_MAX_DEVICES),
	/*
	 * grant --root (the OCI hook): the rootfs and its identity, only
	 * together. Records older than the keys were written for the
	 * process's own root, where their nodes are then removed.
	 */
	DG_FIELD("root", DG_F_STR, struct lease, root),
	DG_FIELD("root_id", DG_F_OBJ, struct lease, root_dev, .required = true, .with = "root",
		 .sub = &root_id_schema),
	/*
	 * "/dev/NAME" of each node that was in place when the lease got it,
	 * which revoke leaves. Older records lack it: every node was devgate's,
	 * as the devgated that wrote them held (and removed them all).
	 */
	DG_FIELD_N("kept", DG_F_STRS, struct lease, kept, n_kept, .elem = sizeof(struct lease_kept),
		   .max = DG_MAX_NODES),
	/*
	 * cgroup v1: the devices cgroup and the rules devgate added there.
	 * Older records lack them (devgate then knew only v2).
	 */
	DG_FIELD("cgroup1", DG_F_STR, struct lease, cg1_path),
	DG_FIELD_N("cgroup1_added", DG_F_STRS, struct lease, cg1_added, n_cg1_added,
		   .with = "cgroup1", .elem = sizeof(struct lease_cg1_rule), .max = DG_MAX_NODES),
};
static const struct dg_schema lease_schema =
	DG_RECORD_SCHEMA("lease record", struct lease, lease_fields);

struct move_record {
	uint64_t to;
	struct lease lease;
};

static const struct dg_field move_fields[] = {
	DG_FIELD("to", DG_F_ID, struct move_record, to, .required = true),
	DG_FIELD("lease", DG_F_OBJ, struct move_record, lease, .required = true,
		 .sub = &lease_schema),
};
static const struct dg_schema move_schema =
	DG_RECORD_SCHEMA("move journal", struct move_record, move_fields);

/*
 * A member added to one of these structs needs a line in its table above
 * (or, for state that is never stored, a comment saying so at the member),
 * a value in record_lease_full() (tests/unit/record_leases.h) and a
 * comparison in test_record.c, which checks that it comes back; lease_copy()
 * must copy it too. Then update the size here. The sizes are those of
 * 64-bit Linux; elsewhere the check is skipped.
 */
#define RECORD_LP64 (sizeof(void *) == 8 && sizeof(long) == 8)
_Static_assert(!RECORD_LP64 || sizeof(struct lease) == 264, "struct lease changed: see above");
_Static_assert(!RECORD_LP64 || sizeof(struct lease_gpu) == 168,
	       "struct lease_gpu changed: see above");
_Static_assert(!RECORD_LP64 || sizeof(struct lease_spent) == 88,
	       "struct lease_spent changed: see above");
_Static_assert(!RECORD_LP64 || sizeof(struct lease_device) == 304,
	       "struct lease_device changed: see above");
_Static_assert(sizeof(struct lease_file) == LEASE_FILE_PATH_MAX,
	       "struct lease_file changed: see above");
_Static_assert(sizeof(struct lease_dir) == LEASE_FILE_PATH_MAX + 8,
	       "struct lease_dir changed: see above");
_Static_assert(sizeof(struct lease_kept) == LEASE_KEPT_MAX, "struct lease_kept changed: see above");
_Static_assert(!RECORD_LP64 || sizeof(struct dg_majors) == 28,
	       "struct dg_majors changed: see above");

json_object *record_encode(const struct lease *l)
{
	return dg_encode(&lease_schema, l);
}

json_object *record_move_encode(const struct lease *gone, uint64_t to)
{
	struct move_record m = { .to = to, .lease = *gone };

	return dg_encode(&move_schema, &m);
}

/* Returns why GPU g's fields do not go together, or NULL when they do. */
static const char *gpu_wrong(const struct lease_gpu *g)
{
	bool nvidia = g->family == DG_VENDOR_NVIDIA;

	if (nvidia && g->minor >= DG_NVIDIACTL_MINOR)
		return "'minor' is out of range for an NVIDIA GPU (0 to 254)";
	if (nvidia && g->card)
		return "'card' is for a DRM GPU; an NVIDIA GPU has no card node";
	if (!nvidia && g->instance)
		return "'gi' is for an NVIDIA GPU; only those have MIG instances";
	if (g->instance && g->n_caps == 0)
		return "'caps' is empty; an instance has at least its own capability node";
	return NULL;
}

/*
 * Returns why device i of l is wrong, or NULL when it is fine: its name must
 * be one path component, as a grant requires (hostdev.c), its host path
 * absolute, and no earlier device may have its name or its numbers.
 */
static const char *device_wrong(const struct lease *l, size_t i)
{
	const struct lease_device *d = &l->devices[i];

	if (!d->name[0] || strchr(d->name, '/') || strcmp(d->name, ".") == 0 ||
	    strcmp(d->name, "..") == 0)
		return "'path' is not /dev/NAME";
	if (d->host[0] != '/')
		return "'host' is not an absolute path";
	for (size_t k = 0; k < i; k++) {
		const struct lease_device *o = &l->devices[k];

		if (strcmp(o->name, d->name) == 0 ||
		    (o->major == d->major && o->minor == d->minor && o->block == d->block))
			return "it is listed twice (the same path or the same device)";
	}
	return NULL;
}

/* Whether path, element i of key, is not absolute; then why says so. */
static bool not_absolute(const char *key, size_t i, const char *path, char *why, size_t len)
{
	if (path[0] == '/')
		return false;
	snprintf(why, len, "lease record: %s[%zu]: '%s' is not an absolute path", key, i, path);
	return true;
}

/*
 * Checks what the tables cannot: fields that must agree with each other.
 * Returns 0, or -EINVAL with why naming the field. Also gives a GPU from a
 * record older than GPU time the lease's start as the start of its span.
 */
static int record_check(struct lease *l, char *why, size_t len)
{
	const char *wrong;

	for (size_t i = 0; i < l->n_gpus; i++) {
		wrong = gpu_wrong(&l->gpus[i]);
		if (wrong) {
			snprintf(why, len, "lease record: gpus[%zu]: %s", i, wrong);
			return -EINVAL;
		}
		if (l->gpus[i].since_ms == SINCE_UNKNOWN)
			l->gpus[i].since_ms = l->since * 1000;
	}
	for (size_t i = 0; i < l->n_devices; i++) {
		wrong = device_wrong(l, i);
		if (wrong) {
			snprintf(why, len, "lease record: devices[%zu]: %s", i, wrong);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < l->n_kept; i++) {
		const char *name = l->kept[i].path + 5;

		if (strncmp(l->kept[i].path, "/dev/", 5) != 0 || !name[0] || name[0] == '.' ||
		    strstr(name, "/.") || name[strlen(name) - 1] == '/') {
			snprintf(why, len, "lease record: kept[%zu]: '%s' is not /dev/NAME", i,
				 l->kept[i].path);
			return -EINVAL;
		}
	}
	if (l->root && l->root[0] != '/') {
		snprintf(why, len, "lease record: root '%s' is not an absolute path", l->root);
		return -EINVAL;
	}
	for (size_t i = 0; i < l->n_driver_files; i++) {
		if (not_absolute("driver_files", i, l->driver_files[i].path, why, len))
			return -EINVAL;
	}
	for (size_t i = 0; i < l->n_driver_dirs; i++) {
		if (not_absolute("driver_dirs", i, l->driver_dirs[i].path, why, len))
			return -EINVAL;
	}
	return 0;
}

/*
 * Decodes o with schema s into out, a struct in which l is the lease; then
 * checks l and copies it out of the arena into *ret. Returns 0, -EINVAL
 * with why saying what is wrong, or -ENOMEM.
 */
static int decode(const struct dg_schema *s, json_object *o, void *out, struct lease *l,
		  struct lease **ret, char *why, size_t len)
{
	struct dg_arena a = { 0 };
	struct dg_error err = { 0 };
	int r = dg_decode(s, o, out, &a, &err);

	if (r < 0) {
		snprintf(why, len, "%s", err.message);
		r = r == -ENOMEM ? r : -EINVAL;
	} else {
		r = record_check(l, why, len);
	}
	if (r == 0) {
		*ret = lease_copy(l);
		if (!*ret) {
			snprintf(why, len, "out of memory");
			r = -ENOMEM;
		}
	}
	dg_arena_free(&a);
	return r;
}

int record_decode(json_object *o, struct lease **ret, char *why, size_t why_len)
{
	struct lease l;

	return decode(&lease_schema, o, &l, &l, ret, why, why_len);
}

int record_move_decode(json_object *o, struct lease **ret, uint64_t *to, char *why, size_t why_len)
{
	struct move_record m;
	int r = decode(&move_schema, o, &m, &m.lease, ret, why, why_len);

	if (r == 0)
		*to = m.to;
	return r;
}
