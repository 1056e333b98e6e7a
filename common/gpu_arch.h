/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's architecture family, from its PCI ids or its model name. */
#ifndef DEVGATE_GPU_ARCH_H
#define DEVGATE_GPU_ARCH_H

#include <stdbool.h>
#include <stdint.h>

/* Architecture family from PCI ids, then from the model name; "unknown". */
const char *gpu_arch(uint16_t vendor, uint16_t device, const char *model);
bool gpu_arch_is_known_name(const char *name);

#endif
