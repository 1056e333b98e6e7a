/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an OCI hook is told: the runtime's state JSON on stdin and the
 * bundle's config.json. Trust differs by field: the state and the bundle
 * path come from the runtime, annotations from the orchestrator, but
 * process.env comes from the image, which the container's author controls.
 */
#ifndef DEVGATE_OCI_H
#define DEVGATE_OCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "errors.h"

#define OCI_STATE_MAX ((size_t)1024 * 1024)
#define OCI_CONFIG_MAX ((size_t)4 * 1024 * 1024)

/* Annotation keys of devgate's own (set by an orchestrator). */
#define ANNOT_GPUS "devgate.io/gpus"
#define ANNOT_COUNT "devgate.io/gpu-count"
#define ANNOT_ARCH "devgate.io/gpu-arch"
#define ANNOT_MODEL "devgate.io/gpu-model"
#define ANNOT_PRODUCT "devgate.io/gpu-product"
#define ANNOT_SHARED "devgate.io/shared"
#define ANNOT_MIN_MEMORY "devgate.io/gpu-min-memory"
#define ANNOT_MIN_CC "devgate.io/gpu-min-cc"
#define ANNOT_SAME_NUMA "devgate.io/same-numa"
/* Names devgated's devgate.conf defines; devgated expands them. */
#define ANNOT_ALIAS "devgate.io/alias"
#define ANNOT_PROFILE "devgate.io/profile"
#define ANNOT_TTL "devgate.io/ttl"
#define ANNOT_WAIT "devgate.io/wait"
/* The driver's files with the GPUs, as grant --driver; "from-env": the image's choice. */
#define ANNOT_DRIVER "devgate.io/driver"
#define ANNOT_DRIVER_FROM_ENV "from-env"

enum oci_stage {
	STAGE_NONE,
	STAGE_CREATE,
	STAGE_POSTSTOP
};

struct oci_state {
	char *id;
	char *status;
	char *bundle;
	pid_t pid;
};

struct oci_config {
	char *root;		  /* absolute rootfs path (bundle-relative resolved) */
	bool root_in_bundle;	  /* root.path was relative to the bundle */
	json_object *annotations; /* object or NULL */
	json_object *env;	  /* process.env array or NULL */
};

/* Where a GPU request came from, in decreasing order of trust. */
enum req_source {
	REQ_NONE,
	REQ_CDI,
	REQ_ANNOTATION,
	REQ_IMAGE_ENV
};

struct oci_request {
	enum req_source source;
	char *gpus; /* selectors, or NULL for a count */
	int count;
	char *arch;
	char *model;
	char *product;
	char *min_memory;
	char *min_cc;
	char *alias;
	char *profile;
	bool shared;
	bool same_numa;
	int64_t ttl;  /* devgate.io/ttl in seconds, whatever asked for the GPUs; 0: none */
	int64_t wait; /* devgate.io/wait in seconds: wait this long for busy GPUs; 0: not */
	char *driver; /* devgate.io/driver: "utility,compute" for grant --driver; NULL: none */
};

int oci_state_parse(const char *text, struct oci_state *ret, struct dg_error *err);
void oci_state_done(struct oci_state *s);

/* Stage from the hook's argument, or from the state's status when NULL. */
int oci_stage(const char *arg, const char *status, enum oci_stage *ret, struct dg_error *err);

int oci_config_parse(const char *text, const char *bundle, struct oci_config *ret,
		     struct dg_error *err);
/* Reads BUNDLE/config.json without following a symlink at its name. */
int oci_config_load(const char *bundle, struct oci_config *ret, struct dg_error *err);
void oci_config_done(struct oci_config *c);

/*
 * Opens the rootfs as the runtime sees it and returns its identity. A
 * relative root.path resolves inside the bundle (symlinks never lead out);
 * an absolute one as the runtime resolves it.
 */
int oci_root_identity(const char *bundle, const struct oci_config *cfg, uint64_t *ret_dev,
		      uint64_t *ret_ino, struct dg_error *err);

/*
 * The request, by trust: a CDI selector from the hook's own arguments, else
 * devgate's annotations, else (if allow_env) NVIDIA_VISIBLE_DEVICES from
 * the image. REQ_NONE when nothing asks for a GPU.
 */
int oci_request(const char *cdi_gpus, const struct oci_config *cfg, bool allow_env,
		struct oci_request *ret, struct dg_error *err);
/* The request of a CDI device made for an alias of devgated's (--alias NAME). */
int oci_request_alias(const char *alias, struct oci_request *ret);
void oci_request_done(struct oci_request *r);
const char *oci_source_name(enum req_source s);

#endif
