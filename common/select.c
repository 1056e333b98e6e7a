// SPDX-License-Identifier: Apache-2.0
/* GPU selectors: "0,2", "all", UUIDs or unique UUID prefixes, PCI bus ids. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "select.h"
#include "util.h"

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
	}
	return true;
}

/* UUID without its "GPU-" prefix, for prefix matching either way. */
static const char *uuid_body(const char *s)
{
	return strncasecmp(s, "GPU-", 4) == 0 ? s + 4 : s;
}

static int select_uuid(const struct dg_inventory *inv, const char *sel, bool *selected,
		       struct dg_error *err)
{
	const char *want = uuid_body(sel);
	size_t wlen = strlen(want);
	ssize_t hit = -1;
	size_t hits = 0;

	if (wlen == 0)
		return dg_error_set(err, DG_E_INVALID, EINVAL, "GPU selector '%s' is empty", sel);
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const char *have = uuid_body(inv->gpus[i].uuid);

		if (!inv->gpus[i].uuid[0] || strncasecmp(have, want, wlen) != 0)
			continue;
		if (strlen(have) == wlen) { /* exact match wins over prefixes */
			hit = (ssize_t)i;
			hits = 1;
			break;
		}
		hit = (ssize_t)i;
		hits++;
	}
	if (hits == 0)
		return dg_error_set(err, DG_E_NO_GPU, ENODEV,
				    "no GPU has a UUID starting with '%s'", sel);
	if (hits > 1)
		return dg_error_set(err, DG_E_NO_GPU, ENODEV,
				    "UUID prefix '%s' is ambiguous: %zu GPUs match", sel, hits);
	selected[hit] = true;
	return 0;
}

static int select_one(const struct dg_inventory *inv, const char *sel, bool *selected,
		      struct dg_error *err)
{
	char pci[32];

	if (strcmp(sel, "all") == 0) {
		size_t n = 0;

		/* Every GPU on the host now that devgate may grant: not vanished, not excluded. */
		for (size_t i = 0; i < inv->n_gpus; i++) {
			selected[i] |= !inv->gpus[i].gone && !inv->gpus[i].excluded;
			n += !inv->gpus[i].gone && !inv->gpus[i].excluded;
		}
		if (n == 0)
			return dg_error_set(
				err, DG_E_NO_GPU, ENODEV,
				"GPU selector 'all' matches nothing: no GPU on this host%s",
				inv->n_gpus ? " that devgate may grant" : "");
		return 0;
	}
	if (all_digits(sel)) {
		uint32_t idx;

		if (parse_u32(sel, &idx) < 0 || idx >= inv->n_gpus)
			return dg_error_set(err, DG_E_NO_GPU, ENODEV,
					    "no GPU with index %s: this host has %zu GPU%s", sel,
					    inv->n_gpus, inv->n_gpus == 1 ? "" : "s");
		selected[idx] = true;
		return 0;
	}
	if (strncasecmp(sel, "MIG-", 4) == 0)
		return dg_error_set(err, DG_E_INVALID, EOPNOTSUPP,
				    "'%s' is a MIG device, not a GPU: name instances (GPU:GI or "
				    "MIG-<uuid>) in a list of their own",
				    sel);
	if (strchr(sel, ':')) {
		if (pci_normalize(sel, pci, sizeof(pci)) < 0)
			return dg_error_set(
				err, DG_E_INVALID, EINVAL,
				"'%s' is not a PCI bus id (expected [domain:]bus:dev.fn)", sel);
		for (size_t i = 0; i < inv->n_gpus; i++) {
			if (strcmp(inv->gpus[i].pci, pci) == 0) {
				selected[i] = true;
				return 0;
			}
		}
		return dg_error_set(err, DG_E_NO_GPU, ENODEV, "no GPU at PCI bus id %s", pci);
	}
	for (const char *p = sel; *p; p++) {
		if (!isalnum((unsigned char)*p) && *p != '-')
			return dg_error_set(
				err, DG_E_INVALID, EINVAL,
				"'%s' is not a GPU selector (index, UUID, PCI bus id or "
				"'all')",
				sel);
	}
	return select_uuid(inv, sel, selected, err);
}

int select_gpus(const struct dg_inventory *inv, const char *spec, bool *selected,
		struct dg_error *err)
{
	auto_free char *copy = NULL;
	char *rest;
	int r;

	if (!spec || !*spec || strlen(spec) > 4096)
		return dg_error_set(err, DG_E_INVALID, EINVAL, "empty or oversized GPU selector");
	copy = strdup(spec);
	if (!copy)
		return -ENOMEM;
	for (size_t i = 0; i < inv->n_gpus; i++)
		selected[i] = false;
	rest = copy;
	/* strsep, not strtok: "0,,1" has an empty element, and that is a mistake. */
	for (char *sel = strsep(&rest, ","); sel; sel = strsep(&rest, ",")) {
		sel = strstrip(sel);
		if (!*sel)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "malformed GPU selector '%s': empty element", spec);
		r = select_one(inv, sel, selected, err);
		if (r < 0) {
			if (err && err->code == DG_E_NO_GPU)
				dg_error_hint(err, "run 'devgatectl list' to see this host's GPUs");
			return r;
		}
	}
	return 0;
}
