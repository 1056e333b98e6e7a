// SPDX-License-Identifier: Apache-2.0
/*
 * What a GPU is. The PCI id table is generated from pci.ids (the chip code
 * of each id fixes family and compute capability); the model-name table
 * covers data-centre products, including those newer than that pci.ids. A
 * GPU that matches neither is "unknown": we never guess from id ranges.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "gpu_arch.h"

#define NVIDIA_VENDOR 0x10de

struct gpu_arch_id {
	uint16_t device;
	uint16_t cc;
	const char *arch;
};

#include "gpu_arch_table.h"

/* Whole product tokens of the model string ("NVIDIA A100-SXM4-40GB", "Tesla M2090"). */
static const struct {
	const char *token;
	const char *arch;
	unsigned int cc;
} model_tokens[] = {
	{ "C2050", "fermi", 20 },     { "C2070", "fermi", 20 },	     { "M2070", "fermi", 20 },
	{ "M2075", "fermi", 20 },     { "M2090", "fermi", 20 },	     { "K10", "kepler", 30 },
	{ "K20", "kepler", 35 },      { "K20X", "kepler", 35 },	     { "K40", "kepler", 35 },
	{ "K80", "kepler", 37 },      { "M40", "maxwell", 52 },	     { "M60", "maxwell", 52 },
	{ "P100", "pascal", 60 },     { "P40", "pascal", 61 },	     { "P4", "pascal", 61 },
	{ "V100", "volta", 70 },      { "V100S", "volta", 70 },	     { "T4", "turing", 75 },
	{ "A100", "ampere", 80 },     { "A800", "ampere", 80 },	     { "A30", "ampere", 80 },
	{ "A40", "ampere", 86 },      { "A10", "ampere", 86 },	     { "A16", "ampere", 86 },
	{ "A2", "ampere", 86 },	      { "L4", "ada", 89 },	     { "L40", "ada", 89 },
	{ "L40S", "ada", 89 },	      { "L20", "ada", 89 },	     { "H100", "hopper", 90 },
	{ "H200", "hopper", 90 },     { "H800", "hopper", 90 },	     { "H20", "hopper", 90 },
	{ "GH200", "hopper", 90 },    { "B100", "blackwell", 100 },  { "B200", "blackwell", 100 },
	{ "B300", "blackwell", 103 }, { "GB200", "blackwell", 100 }, { "GB300", "blackwell", 103 },
};

/* Canonical names first, then the other words users write for them. */
static const struct {
	const char *word;
	const char *arch;
} arch_words[] = {
	{ "fermi", "fermi" },	      { "kepler", "kepler" },	{ "maxwell", "maxwell" },
	{ "pascal", "pascal" },	      { "volta", "volta" },	{ "turing", "turing" },
	{ "ampere", "ampere" },	      { "ada", "ada" },		{ "hopper", "hopper" },
	{ "blackwell", "blackwell" }, { "lovelace", "ada" },	{ "ada-lovelace", "ada" },
	{ "ada lovelace", "ada" },    { "adalovelace", "ada" }, { "unknown", "unknown" },
};

static int cmp_id(const void *key, const void *elem)
{
	uint16_t k = *(const uint16_t *)key;
	uint16_t e = ((const struct gpu_arch_id *)elem)->device;

	return (k > e) - (k < e);
}

static bool kind_from_model(const char *model, struct gpu_kind *ret)
{
	char buf[128];
	char *save = NULL;

	if (!model)
		return false;
	snprintf(buf, sizeof(buf), "%s", model);
	for (char *tok = strtok_r(buf, " -_/", &save); tok; tok = strtok_r(NULL, " -_/", &save)) {
		for (size_t i = 0; i < ARRAY_SIZE(model_tokens); i++) {
			if (strcasecmp(tok, model_tokens[i].token) == 0) {
				ret->arch = model_tokens[i].arch;
				ret->cc = model_tokens[i].cc;
				return true;
			}
		}
	}
	return false;
}

struct gpu_kind gpu_kind(uint16_t vendor, uint16_t device, const char *model)
{
	struct gpu_kind k = { "unknown", 0 };

	if (vendor == NVIDIA_VENDOR) {
		const struct gpu_arch_id *hit = bsearch(&device, gpu_arch_ids,
							ARRAY_SIZE(gpu_arch_ids),
							sizeof(gpu_arch_ids[0]), cmp_id);

		if (hit) {
			k.arch = hit->arch;
			k.cc = hit->cc;
			return k;
		}
	}
	(void)kind_from_model(model, &k);
	return k;
}

const char *gpu_arch(uint16_t vendor, uint16_t device, const char *model)
{
	return gpu_kind(vendor, device, model).arch;
}

const char *gpu_arch_canonical(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(arch_words); i++) {
		if (strcasecmp(arch_words[i].word, name) == 0)
			return arch_words[i].arch;
	}
	return NULL;
}

bool gpu_arch_is_known_name(const char *name)
{
	const char *arch = gpu_arch_canonical(name);

	return arch && strcmp(arch, "unknown") != 0;
}

int gpu_cc_parse(const char *s, unsigned int *ret)
{
	unsigned int major = 0, minor = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p) && major < 100; p++)
		major = major * 10 + (unsigned int)(*p - '0');
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		minor = (unsigned int)(*p++ - '0');
	}
	if (*p || major == 0 || major > 99)
		return -EINVAL;
	*ret = major * 10 + minor;
	return 0;
}

void gpu_cc_format(unsigned int cc, char *buf, size_t len)
{
	if (cc == 0)
		snprintf(buf, len, "%s", "");
	else
		snprintf(buf, len, "%u.%u", cc / 10, cc % 10);
}

/* Digits then a unit; the unit's power of 1024 over MiB in *shift. */
static int size_split(const char *s, uint64_t *num, unsigned int *shift)
{
	static const struct {
		const char *unit;
		unsigned int shift;
	} units[] = {
		{ "m", 0 },    { "mb", 0 }, { "mib", 0 }, { "g", 10 },	 { "gb", 10 },
		{ "gib", 10 }, { "t", 20 }, { "tb", 20 }, { "tib", 20 },
	};
	uint64_t n = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcasecmp(p, units[i].unit) == 0) {
			*num = n;
			*shift = units[i].shift;
			return 0;
		}
	}
	return -EINVAL;
}

int gpu_size_parse(const char *s, uint64_t *ret_mib)
{
	unsigned int shift;
	uint64_t n;

	if (size_split(s, &n, &shift) < 0 || n == 0 || n > (UINT64_MAX >> 21) >> shift)
		return -EINVAL;
	*ret_mib = n << shift;
	return 0;
}

uint64_t gpu_memory_from_model(const char *model)
{
	char buf[128];
	char *save = NULL;
	uint64_t mib;

	if (!model)
		return 0;
	snprintf(buf, sizeof(buf), "%s", model);
	for (char *tok = strtok_r(buf, " -_/", &save); tok; tok = strtok_r(NULL, " -_/", &save)) {
		size_t n = strlen(tok);

		if (n > 1 && toupper((unsigned char)tok[n - 1]) == 'B' &&
		    toupper((unsigned char)tok[n - 2]) == 'G' && gpu_size_parse(tok, &mib) == 0)
			return mib;
	}
	return 0;
}
