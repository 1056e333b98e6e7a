/* SPDX-License-Identifier: Apache-2.0 */
/* One growable-array helper instead of a realloc loop in every module. */
#ifndef DEVGATE_ARRAY_H
#define DEVGATE_ARRAY_H

#include <stddef.h>

/*
 * Makes room for need elements of size elem in *v, which holds *cap now:
 * the capacity doubles (from at least 8), so appends stay amortised O(1).
 * 0, or -ENOMEM with *v and *cap unchanged.
 */
int array_reserve(void **v, size_t *cap, size_t need, size_t elem);

/* Room for one more element after the n in v (any pointer type). */
#define ARRAY_GROW(v, n, cap) array_reserve((void **)&(v), &(cap), (n) + 1, sizeof(*(v)))

#endif
