// SPDX-License-Identifier: Apache-2.0
/*
 * Architecture family of a GPU. The PCI id table is generated from pci.ids;
 * the model-name table covers products newer than that pci.ids. A GPU that
 * matches neither is "unknown": we never guess from id ranges.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "gpu_arch.h"

#define NVIDIA_VENDOR 0x10de

struct gpu_arch_id {
	uint16_t device;
	const char *arch;
};

#include "gpu_arch_table.h"

/* Whole product tokens of the model string ("NVIDIA A100-SXM4-40GB"). */
static const struct {
	const char *token;
	const char *arch;
} model_tokens[] = {
	{ "V100", "volta" },	 { "V100S", "volta" },	   { "T4", "turing" },
	{ "A100", "ampere" },	 { "A800", "ampere" },	   { "A30", "ampere" },
	{ "A40", "ampere" },	 { "A10", "ampere" },	   { "A16", "ampere" },
	{ "A2", "ampere" },	 { "L4", "ada" },	   { "L40", "ada" },
	{ "L40S", "ada" },	 { "L20", "ada" },	   { "H100", "hopper" },
	{ "H200", "hopper" },	 { "H800", "hopper" },	   { "H20", "hopper" },
	{ "GH200", "hopper" },	 { "B100", "blackwell" },  { "B200", "blackwell" },
	{ "B300", "blackwell" }, { "GB200", "blackwell" }, { "GB300", "blackwell" },
};

static const char *const arch_names[] = {
	"kepler", "maxwell", "pascal", "volta", "turing", "ampere", "hopper", "ada", "blackwell",
};

static int cmp_id(const void *key, const void *elem)
{
	uint16_t k = *(const uint16_t *)key;
	uint16_t e = ((const struct gpu_arch_id *)elem)->device;

	return (k > e) - (k < e);
}

static const char *arch_from_model(const char *model)
{
	char buf[128];
	char *save = NULL;

	if (!model)
		return NULL;
	snprintf(buf, sizeof(buf), "%s", model);
	for (char *tok = strtok_r(buf, " -_/", &save); tok; tok = strtok_r(NULL, " -_/", &save)) {
		for (size_t i = 0; i < ARRAY_SIZE(model_tokens); i++) {
			if (strcasecmp(tok, model_tokens[i].token) == 0)
				return model_tokens[i].arch;
		}
	}
	return NULL;
}

const char *gpu_arch(uint16_t vendor, uint16_t device, const char *model)
{
	const char *arch;

	if (vendor == NVIDIA_VENDOR) {
		const struct gpu_arch_id *hit = bsearch(&device, gpu_arch_ids,
							ARRAY_SIZE(gpu_arch_ids),
							sizeof(gpu_arch_ids[0]), cmp_id);

		if (hit)
			return hit->arch;
	}
	arch = arch_from_model(model);
	return arch ? arch : "unknown";
}

bool gpu_arch_is_known_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(arch_names); i++) {
		if (strcmp(arch_names[i], name) == 0)
			return true;
	}
	return false;
}
