// SPDX-License-Identifier: Apache-2.0
/*
 * The admin's GPU policy (devgate.conf's gpu-allow, alias and profile
 * lines): parsed and checked as config.c reads the file, then applied to
 * each inventory (which GPUs are excluded) and to each grant request (a
 * profile or alias expanded into constraints). It reads no file itself
 * (config.c hands it the values) and makes no system call beyond writing
 * to the FILE that policy_print is given.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array.h"
#include "cleanup.h"
#include "gpu_arch.h"
#include "policy.h"
#include "util.h"

#define PROFILE_KEYS "gpus arch model product alias min-memory min-cc shared"

void policy_free(struct dg_policy *p)
{
	free(p->aliases);
	free(p->profiles);
	*p = (struct dg_policy){ 0 };
}

/* Parses "10de:2330": exactly four hex digits, a colon, four hex digits. Returns 0 or -EINVAL. */
static int parse_id(const char *s, uint16_t *vendor, uint16_t *device)
{
	unsigned int v, d;
	char tail;

	if (strlen(s) != 9 || s[4] != ':')
		return -EINVAL;
	for (size_t i = 0; i < 9; i++) {
		if (i != 4 && !isxdigit((unsigned char)s[i]))
			return -EINVAL;
	}
	if (sscanf(s, "%4x:%4x%c", &v, &d, &tail) != 2)
		return -EINVAL;
	*vendor = (uint16_t)v;
	*device = (uint16_t)d;
	return 0;
}

int policy_set_allow(struct dg_policy *p, const char *value, struct dg_error *err)
{
	char buf[1024];
	char *rest = buf;
	uint32_t ids[POLICY_MAX_ALLOW];
	size_t n = 0;

	if (strlen(value) >= sizeof(buf))
		return dg_error_set(err, DG_E_INVALID, E2BIG, "the list is too long");
	snprintf(buf, sizeof(buf), "%s", value);
	if (!*strstrip(buf)) {
		p->n_allow = 0;
		return 0;
	}
	for (char *id = strsep(&rest, ","); id; id = strsep(&rest, ",")) {
		uint16_t v, d;

		id = strstrip(id);
		if (parse_id(id, &v, &d) < 0) {
			dg_error_set(err, DG_E_INVALID, EINVAL, "'%s' is not VENDOR:DEVICE", id);
			dg_error_hint(err, "PCI ids in hex, comma separated: 10de:2330, 10de:20b0 "
					   "('devgatectl list' shows each GPU's)");
			return -EINVAL;
		}
		if (n == POLICY_MAX_ALLOW)
			return dg_error_set(err, DG_E_INVALID, E2BIG, "more than %d ids",
					    POLICY_MAX_ALLOW);
		ids[n++] = (uint32_t)v << 16 | d;
	}
	memcpy(p->allow, ids, n * sizeof(ids[0]));
	p->n_allow = n;
	return 0;
}

/*
 * Returns 0 when name is 1 to POLICY_NAME_MAX - 1 letters, digits, '.', '_'
 * or '-'; otherwise -EINVAL with err naming what it was for ("alias").
 */
static int check_name(const char *what, const char *name, struct dg_error *err)
{
	size_t n = strlen(name);

	for (const char *c = name; *c; c++) {
		if (!isalnum((unsigned char)*c) && !strchr("._-", *c))
			n = 0;
	}
	if (n == 0 || n >= POLICY_NAME_MAX) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "%s name '%s' is not a name", what, name);
		dg_error_hint(err, "1 to %d letters, digits, '.', '_' or '-'", POLICY_NAME_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

/* Returns the alias called name, or NULL. */
static const struct policy_alias *find_alias(const struct dg_policy *p, const char *name)
{
	for (size_t i = 0; i < p->n_aliases; i++) {
		if (strcmp(p->aliases[i].name, name) == 0)
			return &p->aliases[i];
	}
	return NULL;
}

/* Returns the profile called name, or NULL. */
static const struct policy_profile *find_profile(const struct dg_policy *p, const char *name)
{
	for (size_t i = 0; i < p->n_profiles; i++) {
		if (strcmp(p->profiles[i].name, name) == 0)
			return &p->profiles[i];
	}
	return NULL;
}

bool policy_has_profile(const struct dg_policy *p, const char *name)
{
	return find_profile(p, name) != NULL;
}

int policy_add_alias(struct dg_policy *p, const char *name, const char *value, struct dg_error *err)
{
	struct policy_alias a = { 0 };
	int r = check_name("alias", name, err);

	if (r < 0)
		return r;
	if (find_alias(p, name))
		return dg_error_set(err, DG_E_INVALID, EEXIST, "alias '%s' is defined twice", name);
	if (parse_id(value, &a.vendor, &a.device) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "alias %s: '%s' is not VENDOR:PRODUCT",
			     name, value);
		dg_error_hint(err, "PCI ids in hex, e.g. alias h100 = 10de:2330");
		return -EINVAL;
	}
	if (p->n_aliases == POLICY_MAX_NAMES)
		return dg_error_set(err, DG_E_INVALID, E2BIG, "more than %d aliases",
				    POLICY_MAX_NAMES);
	snprintf(a.name, sizeof(a.name), "%s", name);
	snprintf(a.product, sizeof(a.product), "%04x:%04x", a.vendor, a.device);
	if (ARRAY_GROW(p->aliases, p->n_aliases, p->cap_aliases) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	p->aliases[p->n_aliases++] = a;
	return 0;
}

/* Copies v, the value of key, into dst. Returns 0, or -EINVAL when v is empty or too long. */
static int set_text(char *dst, size_t len, const char *key, const char *v, struct dg_error *err)
{
	if (!*v || strlen(v) >= len)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "%s wants a value of 1 to %zu "
				    "characters",
				    key, len - 1);
	snprintf(dst, len, "%s", v);
	return 0;
}

/*
 * Sets one KEY=VALUE word of a profile in pr, checked as a grant checks it.
 * Returns 0, or a negative errno with err set.
 */
static int profile_set(const struct dg_policy *p, struct policy_profile *pr, const char *key,
		       const char *v, struct dg_error *err)
{
	uint32_t n;
	uint64_t mib;
	unsigned int cc;
	uint16_t vd, dv;

	if (strcmp(key, "gpus") == 0) {
		if (parse_u32(v, &n) < 0 || n == 0 || n > DG_MAX_GPUS)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "gpus=%s is not a count from 1 to %d", v, DG_MAX_GPUS);
		pr->count = n;
		return 0;
	}
	if (strcmp(key, "arch") == 0) {
		if (!gpu_arch_canonical(v)) {
			dg_error_set(err, DG_E_INVALID, EINVAL, "unknown architecture '%s'", v);
			dg_error_hint(err, "known (any case): " GPU_ARCH_NAMES);
			return -EINVAL;
		}
		return set_text(pr->arch, sizeof(pr->arch), key, v, err);
	}
	if (strcmp(key, "model") == 0)
		return set_text(pr->model, sizeof(pr->model), key, v, err);
	if (strcmp(key, "product") == 0) {
		if (parse_id(v, &vd, &dv) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "product=%s is not VENDOR:DEVICE in hex", v);
		return set_text(pr->product, sizeof(pr->product), key, v, err);
	}
	if (strcmp(key, "alias") == 0) {
		if (!find_alias(p, v))
			return dg_error_set(err, DG_E_INVALID, ENOENT,
					    "alias '%s' is not defined above this profile", v);
		return set_text(pr->alias, sizeof(pr->alias), key, v, err);
	}
	if (strcmp(key, "min-memory") == 0) {
		if (gpu_size_parse(v, &mib) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "min-memory=%s is not a size (40G, 16GiB, 512M)", v);
		return set_text(pr->min_memory, sizeof(pr->min_memory), key, v, err);
	}
	if (strcmp(key, "min-cc") == 0) {
		if (gpu_cc_parse(v, &cc) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "min-cc=%s is not a compute capability (8.0)", v);
		return set_text(pr->min_cc, sizeof(pr->min_cc), key, v, err);
	}
	if (strcmp(key, "shared") == 0) {
		if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "shared=%s is not true or false", v);
		pr->shared = strcmp(v, "true") == 0;
		return 0;
	}
	dg_error_set(err, DG_E_INVALID, ENOENT, "unknown profile key '%s'", key);
	dg_error_hint(err, "a profile takes KEY=VALUE words: " PROFILE_KEYS);
	return -EINVAL;
}

/*
 * Parses a profile's KEY=VALUE words into pr: at least one word, each key
 * once, not both product and alias. Returns 0, or a negative errno with err set.
 */
static int profile_parse(const struct dg_policy *p, struct policy_profile *pr, const char *value,
			 struct dg_error *err)
{
	char buf[1024], seen[512] = " ";
	char *save = NULL;
	size_t words = 0;

	if (strlen(value) >= sizeof(buf))
		return dg_error_set(err, DG_E_INVALID, E2BIG, "the profile is too long");
	snprintf(buf, sizeof(buf), "%s", value);
	for (char *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(w, '='), mark[64];
		int r;

		if (!eq)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not KEY=VALUE (keys: " PROFILE_KEYS ")", w);
		*eq = '\0';
		snprintf(mark, sizeof(mark), " %.60s ", w);
		if (strstr(seen, mark))
			return dg_error_set(err, DG_E_INVALID, EEXIST, "'%s' is given twice", w);
		r = profile_set(p, pr, w, eq + 1, err);
		if (r < 0)
			return r;
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%.60s ", w);
		words++;
	}
	if (words == 0)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "an empty profile (keys: " PROFILE_KEYS ")");
	if (pr->product[0] && pr->alias[0])
		return dg_error_set(err, DG_E_INVALID, EINVAL, "give product or alias, not both");
	return 0;
}

int policy_add_profile(struct dg_policy *p, const char *name, const char *value,
		       struct dg_error *err)
{
	struct policy_profile pr = { 0 };
	int r = check_name("profile", name, err);

	if (r < 0)
		return r;
	if (find_profile(p, name))
		return dg_error_set(err, DG_E_INVALID, EEXIST, "profile '%s' is defined twice",
				    name);
	if (p->n_profiles == POLICY_MAX_NAMES)
		return dg_error_set(err, DG_E_INVALID, E2BIG, "more than %d profiles",
				    POLICY_MAX_NAMES);
	r = profile_parse(p, &pr, value, err);
	if (r < 0)
		return r;
	snprintf(pr.name, sizeof(pr.name), "%s", name);
	if (ARRAY_GROW(p->profiles, p->n_profiles, p->cap_profiles) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	p->profiles[p->n_profiles++] = pr;
	return 0;
}

/* Returns whether g may be granted: gpu-allow lists its vendor:device, or there is no list. */
static bool allowed(const struct dg_policy *p, const struct dg_gpu *g)
{
	uint32_t id = (uint32_t)g->vendor << 16 | g->device;

	for (size_t i = 0; i < p->n_allow; i++) {
		if (p->allow[i] == id)
			return true;
	}
	return p->n_allow == 0;
}

void policy_apply(const struct dg_policy *p, struct dg_inventory *inv)
{
	for (size_t i = 0; i < inv->n_gpus; i++)
		inv->gpus[i].excluded = !allowed(p, &inv->gpus[i]);
}

/* Returns mine when the request gave it, else the profile's value when it has one, else NULL. */
static const char *opt(const char *mine, const char *profile)
{
	return mine ? mine : (profile[0] ? profile : NULL);
}

/* Adds to err a hint about the names devgate.conf defines of what ("profiles"). */
static void names_hint(struct dg_error *err, const char *what, size_t n, const char *first)
{
	if (n == 0)
		dg_error_hint(err,
			      "devgate.conf defines no %s; 'devgated --check-config' "
			      "prints the policy",
			      what);
	else
		dg_error_hint(err, "'devgated --check-config' lists the %s (%zu, e.g. '%s')", what,
			      n, first);
}

/*
 * Fills what req leaves unset from profile name; the alias the profile names
 * goes to *alias unless the request named one. Returns 0, or -ENOENT with
 * err set when no profile has that name.
 */
static int apply_profile(const struct dg_policy *p, const char *name, struct policy_request *req,
			 const char **alias, struct dg_error *err)
{
	const struct policy_profile *pr = find_profile(p, name);

	if (!pr) {
		dg_error_set(err, DG_E_INVALID, ENOENT, "no profile '%s' in devgate.conf", name);
		names_hint(err, "profiles", p->n_profiles,
			   p->n_profiles ? p->profiles[0].name : "");
		return -ENOENT;
	}
	if (!req->has_count && !req->selectors && pr->count) {
		req->count = pr->count;
		req->has_count = true;
	}
	req->model = opt(req->model, pr->model);
	req->arch = opt(req->arch, pr->arch);
	req->product = opt(req->product, pr->product);
	req->min_memory = opt(req->min_memory, pr->min_memory);
	req->min_cc = opt(req->min_cc, pr->min_cc);
	req->shared |= pr->shared;
	*alias = opt(*alias, pr->alias);
	return 0;
}

/*
 * Sets req's product to that of alias name. Returns 0, -ENOENT for an
 * unknown alias, or -EINVAL when req asks for another product; err is set.
 */
static int apply_alias(const struct dg_policy *p, const char *name, struct policy_request *req,
		       struct dg_error *err)
{
	const struct policy_alias *a = find_alias(p, name);

	if (!a) {
		dg_error_set(err, DG_E_INVALID, ENOENT, "no alias '%s' in devgate.conf", name);
		names_hint(err, "aliases", p->n_aliases, p->n_aliases ? p->aliases[0].name : "");
		return -ENOENT;
	}
	if (req->product && strcasecmp(req->product, a->product) != 0)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "alias %s is product %s, but the request asks for %s", name,
				    a->product, req->product);
	req->product = a->product;
	return 0;
}

int policy_resolve(const struct dg_policy *p, const char *profile, const char *alias,
		   struct policy_request *req, struct dg_error *err)
{
	int r = 0;

	if (profile)
		r = apply_profile(p, profile, req, &alias, err);
	if (r == 0 && alias)
		r = apply_alias(p, alias, req, err);
	if (r < 0)
		return r;
	/* A name alone asks for one GPU of that kind. */
	if ((profile || alias) && !req->selectors && !req->has_count) {
		req->count = 1;
		req->has_count = true;
	}
	return 0;
}

void policy_allow_text(const struct dg_policy *p, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < p->n_allow && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%04x:%04x", i ? ", " : "",
					p->allow[i] >> 16, p->allow[i] & 0xffff);
}

/* Writes pr to f as its devgate.conf line. */
static void print_profile(const struct policy_profile *pr, FILE *f)
{
	fprintf(f, "profile %s =", pr->name);
	if (pr->count)
		fprintf(f, " gpus=%u", pr->count);
	if (pr->arch[0])
		fprintf(f, " arch=%s", pr->arch);
	if (pr->model[0])
		fprintf(f, " model=%s", pr->model);
	if (pr->product[0])
		fprintf(f, " product=%s", pr->product);
	if (pr->alias[0])
		fprintf(f, " alias=%s", pr->alias);
	if (pr->min_memory[0])
		fprintf(f, " min-memory=%s", pr->min_memory);
	if (pr->min_cc[0])
		fprintf(f, " min-cc=%s", pr->min_cc);
	if (pr->shared)
		fprintf(f, " shared=true");
	fprintf(f, "\n");
}

void policy_print(const struct dg_policy *p, FILE *f)
{
	for (size_t i = 0; i < p->n_aliases; i++)
		fprintf(f, "alias %s = %s\n", p->aliases[i].name, p->aliases[i].product);
	for (size_t i = 0; i < p->n_profiles; i++)
		print_profile(&p->profiles[i], f);
}
