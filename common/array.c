// SPDX-License-Identifier: Apache-2.0
/* ARRAY_GROW's one function: doubling growth with overflow checks (see array.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "array.h"

int array_reserve(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 8;
	void *nv;

	if (need <= *cap)
		return 0;
	if (elem == 0)
		return -EINVAL;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	nv = realloc(*v, ncap * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}
