/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer entry points get bytes; devgate's parsers take C strings. */
#ifndef DEVGATE_FUZZ_H
#define DEVGATE_FUZZ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_text(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#endif
