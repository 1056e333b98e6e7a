/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_SELECT_H
#define DEVGATE_SELECT_H

#include <stdbool.h>

#include "errors.h"
#include "gpu.h"

/*
 * Resolves a selector list "SEL[,SEL...]" where SEL is an index, a UUID or a
 * unique prefix of one, a PCI bus id, or "all" (the GPUs not vanished and
 * not excluded by the admin's gpu-allow list). selected[] has n_gpus
 * entries. Errors: DG_E_INVALID (malformed), DG_E_NO_GPU (no match or
 * ambiguous prefix).
 */
int select_gpus(const struct dg_inventory *inv, const char *spec, bool *selected,
		struct dg_error *err);

#endif
