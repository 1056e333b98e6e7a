/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a GPU is, from its PCI ids or its model name: architecture family,
 * compute capability and memory size. Also the parsers of the request
 * words that select by them (--arch, --min-cc, --min-memory).
 */
#ifndef DEVGATE_GPU_ARCH_H
#define DEVGATE_GPU_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Family names, oldest first, for hints: "fermi kepler ... blackwell". */
#define GPU_ARCH_NAMES "fermi kepler maxwell pascal volta turing ampere ada hopper blackwell"

struct gpu_kind {
	const char *arch; /* static string, "unknown" when not known */
	unsigned int cc;  /* compute capability, major * 10 + minor; 0: not known */
};

/* Family and compute capability from PCI ids, then from the model name. */
struct gpu_kind gpu_kind(uint16_t vendor, uint16_t device, const char *model);
/* Architecture family alone, as gpu_kind(). */
const char *gpu_arch(uint16_t vendor, uint16_t device, const char *model);

/*
 * The family a user's word names, in any case ("Hopper", "ADA", "lovelace",
 * "ada-lovelace"); "unknown" too. NULL for a word that names none.
 */
const char *gpu_arch_canonical(const char *name);
/* A family's name in any of those words; "unknown" is none. */
bool gpu_arch_is_known_name(const char *name);

/* "8.6" -> 86, "9" -> 90, "10.0" -> 100; -EINVAL otherwise. */
int gpu_cc_parse(const char *s, unsigned int *ret);
/* 86 -> "8.6"; "" for 0. */
void gpu_cc_format(unsigned int cc, char *buf, size_t len);

/*
 * Memory in MiB from the model name's size token ("NVIDIA A100-SXM4-40GB",
 * "H100 80GB HBM3"): a whole token of digits and "GB", in GiB. 0: none.
 */
uint64_t gpu_memory_from_model(const char *model);

/*
 * A size with a binary unit: "40G", "40GB", "40GiB", "512M", "1T" (any
 * case), into MiB. No unit, zero, a fraction or overflow: -EINVAL.
 */
int gpu_size_parse(const char *s, uint64_t *ret_mib);

#endif
