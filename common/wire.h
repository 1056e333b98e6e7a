/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every message devgated and its clients exchange, as C structs with one
 * schema each (wire.c). The daemon decodes a request into struct
 * dg_request before any module sees it and encodes its replies from the
 * structs below; devgatectl, devgate-hook and the tests decode replies into
 * the same structs. Nothing reads or writes a key the schemas do not name.
 *
 * Strings and arrays of a decoded message live in its arena.
 */
#ifndef DEVGATE_WIRE_H
#define DEVGATE_WIRE_H

#include "protocol.h"
#include "schema.h"

/* Requests */

/*
 * The longest container label (an OCI id is at most 64 characters, a
 * Kubernetes name 253) and request source ("cli", "hook/createRuntime")
 * devgated takes; longer ones are refused as invalid.
 */
#define DG_LABEL_MAX 256
#define DG_SOURCE_MAX 64

/*
 * Which container: exactly one of pid, cgroup or container. With pid or
 * cgroup, container is a label; alone, it is a lease's label or a name a
 * runtime knows (devgated resolves it, in runtime alone when given).
 */
struct dg_target_args {
	int64_t pid;
	bool has_pid;
	const char *cgroup;
	const char *container;
	const char *runtime; /* with container alone: the runtime whose name it is */
	const char *source;  /* who asks: "cli", "hook/createRuntime", ... */
};

struct dg_list_req {
	bool free;
};

/*
 * What the hook found at the bundle's rootfs (st_dev, st_ino): devgated
 * makes nodes only if the target's mount namespace holds that directory.
 */
struct dg_root_id {
	uint64_t dev;
	uint64_t ino;
};

struct dg_grant_req {
	struct dg_target_args target;
	const char *gpus;     /* selectors: "0,2", "all", UUIDs */
	const char **devices; /* host character devices: "HOST[:PATH]", one each */
	size_t n_devices;
	int64_t count;
	const char *model;
	const char *arch;
	const char *vendor; /* "nvidia", "amd", "intel" */
	const char *product;
	const char *min_memory; /* "40G" */
	const char *min_cc;	/* "8.0" */
	const char *alias;	/* a name devgate.conf gives a vendor:product */
	const char *profile;	/* a named request in devgate.conf */
	const char *root;	/* the container's root when the PID is not in it yet */
	struct dg_root_id root_id;
	int64_t ttl;	    /* seconds until the lease expires; replaces an expiry it had */
	const char *access; /* the devices' access: "r", "rw", "rwm"; NULL: rw */
	const char *driver; /* the driver's files to mount: "compute,utility", "all" */
	int64_t wait;	    /* queue when busy, this many seconds at most; 0: no limit */
	int64_t priority;   /* in the queue: higher first, FIFO within one; default 0 */
	/* Flags last: the struct packs without holes. */
	bool has_count;
	bool card; /* DRM GPUs: their card nodes too */
	bool shared;
	bool has_root_id;
	bool from_image; /* asked for by the image's environment */
	bool has_ttl;
	bool kill_on_expiry; /* with ttl: kill holders of its nodes at expiry */
	bool same_numa;	     /* with a count: all on one NUMA node */
	bool has_wait;
	bool has_priority;
};

struct dg_revoke_req {
	struct dg_target_args target;
	const char *gpus;
	const char **devices; /* container or host paths of granted devices */
	size_t n_devices;
	bool missing_ok;
	int64_t kill; /* signal for processes still holding a revoked device */
	bool has_kill;
};

struct dg_events_req {
	bool follow;
};

/* More time for a lease that expires: by seconds more, or ttl seconds from now. */
struct dg_extend_req {
	struct dg_target_args target;
	int64_t by;
	bool has_by;
	int64_t ttl;
	bool has_ttl;
};

/* GPUs held by from go to to in one step (devgatectl move). */
struct dg_move_req {
	struct dg_target_args from;
	struct dg_target_args to;
	const char *gpus; /* selectors of GPUs from holds; "all" */
	int64_t kill;	  /* signal for processes in from still holding a moved GPU */
	bool has_kill;
};

struct dg_request {
	enum dg_op op;
	union {
		struct dg_list_req list;
		struct dg_grant_req grant;
		struct dg_revoke_req revoke;
		struct dg_events_req events;
		struct dg_extend_req extend;
		struct dg_move_req move;
	} u;
	struct dg_arena arena;
};

/* Replies and events */

struct dg_node_info {
	const char *path;
	int64_t major, minor;
};

struct dg_gpu_info {
	int64_t index;
	bool has_index;
	int64_t minor;
	const char *uuid;   /* the stable id: UUID, else the PCI bus id */
	const char *vendor; /* "nvidia", "amd", "intel" */
	const char *pci;
	const char *product; /* "10de:20b0" */
	const char *model;
	const char *arch;
	const char *cc;	    /* compute capability "9.0"; NULL when not known */
	int64_t memory_mib; /* from the model name */
	bool has_memory_mib;
	int64_t numa_node; /* from sysfs */
	bool has_numa_node;
	struct dg_node_info node;
	bool has_node;
	const char *problem; /* why it cannot be used; NULL when fine */
};

struct dg_holder_info {
	const char *container;
	const char *runtime; /* whose name container is; NULL: a label */
	const char *cgroup;
	int64_t pid;
	bool shared;
};

/* A MIG compute instance of a GPU instance. */
struct dg_ci_info {
	int64_t ci;
	int64_t minor;	  /* of /dev/nvidia-caps/nvidia-cap<minor> */
	const char *uuid; /* NVML's "MIG-<uuid>"; NULL: not known */
};

/* A MIG GPU instance of a GPU: grant --gpu GPU:GI. */
struct dg_instance_info {
	int64_t gi;
	int64_t minor;	     /* of /dev/nvidia-caps/nvidia-cap<minor> */
	const char *profile; /* NVML's name ("1g.10gb"); NULL: not known */
	const char *uuid;    /* NVML's "MIG-<uuid>" of its first compute instance; NULL */
	const char *state;   /* free, held */
	struct dg_ci_info *cis;
	size_t n_cis;
	struct dg_holder_info holder;
	bool has_holder;
};

struct dg_list_gpu {
	struct dg_gpu_info gpu;
	const char *state; /* free, held, shared, unusable, excluded, split (instances held) */
	struct dg_holder_info *holders;
	size_t n_holders;
	bool has_mig; /* NVIDIA: MIG mode on */
	bool mig;
	struct dg_instance_info *instances;
	size_t n_instances;
};

struct dg_driver_info {
	bool loaded;
	int64_t nvidia_major;
	bool has_nvidia_major;
	int64_t uvm_major;
	bool has_uvm_major;
};

/* An alias devgate.conf defines: a name for a PCI vendor:device id. */
struct dg_alias_info {
	const char *name;
	const char *product;
};

struct dg_list_reply {
	const char *host_root;
	bool free_only;
	struct dg_driver_info driver;
	struct dg_list_gpu *gpus;
	size_t n_gpus;
	struct dg_node_info *control_nodes;
	size_t n_control_nodes;
	const char *control_problem;
	const char *nvml_problem;      /* why MIG profiles and UUIDs are not known */
	struct dg_alias_info *aliases; /* for CDI devices named by alias */
	size_t n_aliases;
};

struct dg_lease_gpu {
	struct dg_gpu_info gpu;
	int64_t gi; /* a MIG instance of the GPU, not all of it */
	bool has_gi;
	bool shared;
	double gpu_seconds; /* this lease's time on this GPU */
	bool has_gpu_seconds;
};

/* A host device a lease holds (grant --device): char, or block where allowed. */
struct dg_lease_device {
	const char *path; /* in the container: /dev/NAME */
	const char *host; /* on the host, as granted */
	const char *type; /* "c", or "b" for a block device */
	int64_t major, minor;
	const char *access; /* "r", "rw", "rwm" */
};

struct dg_lease_info {
	uint64_t cgroup_id;
	const char *cgroup;
	const char *container;
	const char *runtime; /* whose name container is; NULL: a label */
	int64_t pid;
	const char *since;
	struct dg_lease_gpu *gpus;
	size_t n_gpus;
	struct dg_lease_device *devices;
	size_t n_devices;
	const char *expires; /* RFC 3339 UTC; NULL: the lease does not expire */
	int64_t expires_in;  /* seconds left when the reply was made */
	bool has_expires_in;
	bool kill_on_expiry;
	bool has_kill_on_expiry;
	const char *driver;   /* grant --driver: "utility,compute"; NULL: none */
	int64_t driver_files; /* how many of the driver's files are mounted */
	bool has_driver_files;
	double gpu_seconds; /* GPU-seconds of the lease: a second with N GPUs adds N */
	bool has_gpu_seconds;
};

struct dg_node_status {
	const char *path;
	const char *status; /* created, present, removed, absent, conflict, ... */
};

struct dg_grant_reply {
	struct dg_lease_info lease;
	const char **granted; /* UUIDs new in this grant */
	size_t n_granted;
	const char **granted_devices; /* container paths new in this grant */
	size_t n_granted_devices;
	struct dg_node_status *nodes;
	size_t n_nodes;
	const char **warnings;
	size_t n_warnings;
	const char *reason; /* a counted grant: why these GPUs */
};

/* A process that still has a revoked device open or mapped. */
struct dg_holder_proc {
	int64_t pid;
	const char *comm;
	const char *node; /* /dev/NAME */
};

struct dg_revoke_reply {
	struct dg_lease_info lease; /* absent when missing_ok found nothing */
	bool has_lease;
	const char **revoked;
	size_t n_revoked;
	const char **revoked_devices; /* container paths */
	size_t n_revoked_devices;
	struct dg_node_status *nodes;
	size_t n_nodes;
	struct dg_holder_proc *holders;
	size_t n_holders;
	int64_t killed; /* holders signalled (revoke with kill) */
};

struct dg_extend_reply {
	struct dg_lease_info lease;
};

struct dg_move_reply {
	struct dg_lease_info from; /* what the source holds after the move */
	struct dg_lease_info to;
	const char **moved; /* UUIDs */
	size_t n_moved;
	struct dg_holder_proc *holders; /* in from, still holding a moved GPU's node */
	size_t n_holders;
	int64_t killed;
};

struct dg_status_reply {
	struct dg_lease_info *leases;
	size_t n_leases;
};

/* The daemon's settings, so clients check what it really uses. */
struct dg_settings {
	const char *socket;
	const char *state_dir;
	const char *pin_root;
	const char *host_root;
	const char *cgroup_root;
	const char *metrics_listen;
};

struct dg_ping_reply {
	const char *version;
	int64_t pid;
	int64_t leases;
	bool hook_allow_env;
	struct dg_settings settings;
	bool has_settings;
};

struct dg_metrics_reply {
	const char *format;
	const char *text;
};

struct dg_denied_event {
	const char *time;
	const char *type; /* "denied" */
	const char *container;
	const char *cgroup;
	uint64_t cgroup_id;
	const char *device; /* "c 195:1" */
	const char *node;
	const char *gpu;
	const char *access; /* "rw", "m", ... */
};

struct dg_events_reply {
	struct dg_denied_event *events;
	size_t n_events;
	bool follow;
};

struct dg_watch_reply {
	bool watching;
};

/* What a re-read of the inventory found, by GPU UUID. */
struct dg_rescan_reply {
	int64_t gpus; /* listed now, vanished ones included */
	const char **appeared;
	size_t n_appeared;
	const char **vanished;
	size_t n_vanished;
	const char **changed; /* still there, but usable now or no more, or renumbered */
	size_t n_changed;
};

/* What a policy reload put in force (devgatectl reload, SIGHUP). */
struct dg_reload_reply {
	int64_t excluded;   /* GPUs excluded now */
	int64_t newly_held; /* of those, held GPUs it excluded: kept by their leases */
	int64_t aliases, profiles, device_allow;
	const char *restart; /* keys that changed but wait for a restart, ", " apart; or NULL */
};

struct dg_watch_event {
	/* granted, revoked, released, expired, extended; vanished, restored (GPUs of the lease);
	 * refreshed (its nodes moved to a reloaded driver's numbers) */
	const char *type;
	struct dg_lease_info lease;
	const char **gpus;
	size_t n_gpus;
};

/* A grant waiting in the queue: its place now (an event of a waiting grant). */
struct dg_wait_event {
	const char *type; /* "waiting" */
	int64_t position; /* 1: next to be served */
	int64_t of;
	const char *reason; /* why it cannot be served now */
};

struct dg_waiter_info {
	int64_t position;
	int64_t priority;
	const char *container; /* the grant's label */
	const char *cgroup;
	int64_t pid;
	bool has_pid;
	const char *request; /* "--gpus 2 --shared" */
	int64_t waited_ms;
	int64_t timeout; /* seconds; absent: no limit */
	bool has_timeout;
	int64_t uid;
};

struct dg_queue_reply {
	struct dg_waiter_info *waiters;
	size_t n_waiters;
};

/* A running container a runtime's state names, proved from the kernel. */
struct dg_found_info {
	const char *runtime;
	const char *name;
	const char *id;
	int64_t pid;
	const char *cgroup;
};

struct dg_containers_reply {
	struct dg_found_info *found;
	size_t n_found;
	const char *searched; /* where, and what could not be read */
};

/* A decoded reply of any op; which member is valid follows the op. */
union dg_reply {
	struct dg_ping_reply ping;
	struct dg_list_reply list;
	struct dg_grant_reply grant;
	struct dg_revoke_reply revoke;
	struct dg_status_reply status;
	struct dg_watch_reply watch;
	struct dg_metrics_reply metrics;
	struct dg_events_reply events;
	struct dg_rescan_reply rescan;
	struct dg_extend_reply extend;
	struct dg_move_reply move;
	struct dg_queue_reply queue;
	struct dg_containers_reply containers;
	struct dg_reload_reply reload;
};

union dg_stream_event {
	struct dg_watch_event watch;
	struct dg_denied_event denied;
	struct dg_wait_event wait;
};

extern const struct dg_schema dg_lease_schema;
extern const struct dg_schema dg_denied_event_schema;

/* Request line -> struct; unknown ops and fields, wrong types: DG_E_PROTOCOL. */
int dg_request_decode(const char *line, struct dg_request *req, struct dg_error *err);
json_object *dg_request_encode(const struct dg_request *req);
void dg_request_done(struct dg_request *req);

json_object *dg_reply_encode(enum dg_op op, const union dg_reply *reply);
/*
 * Reply line -> struct, its strings in a. An error reply fills err and
 * returns -EREMOTEIO; a malformed one DG_E_PROTOCOL and -EPROTO.
 */
int dg_reply_decode(enum dg_op op, const char *line, union dg_reply *reply, struct dg_arena *a,
		    struct dg_error *err);

json_object *dg_event_encode(enum dg_op op, const union dg_stream_event *ev);
int dg_event_decode(enum dg_op op, const char *line, union dg_stream_event *ev, struct dg_arena *a,
		    struct dg_error *err);

#endif
