// SPDX-License-Identifier: Apache-2.0
/* log_escape: what a client or container supplies cannot forge, reorder or hide log text. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "log.h"

static void escaped(const char *in, const char *want)
{
	char out[256];

	log_escape(in, out, sizeof(out));
	assert_string_equal(out, want);
}

static void test_escape_controls(void **state)
{
	(void)state;
	escaped("plain text, 0-9", "plain text, 0-9");
	escaped("a\nb\rc\td\x1b[31m\x7f", "a\\x0ab\\x0dc\\x09d\\x1b[31m\\x7f");
	escaped("back\\slash", "back\\\\slash");
	/* Printable UTF-8 stays as it is. */
	escaped("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80",
		"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
}

static void test_escape_invisible(void **state)
{
	(void)state;
	/* Bidirectional overrides, isolates and marks; zero-width; separators; C1; BOM. */
	escaped("a\xe2\x80\xae\x62", "a\\u202eb"); /* \x62: b, not more hex digits */
	escaped("\xe2\x81\xa6x\xe2\x81\xa9", "\\u2066x\\u2069");
	escaped("\xe2\x80\x8f\xe2\x80\x8b\xe2\x80\xa8\xe2\x80\xa9", "\\u200f\\u200b\\u2028\\u2029");
	escaped("\xc2\x85\xc2\x9b", "\\u0085\\u009b");
	escaped("\xef\xbb\xbf", "\\ufeff");
	escaped("\xd8\x9c", "\\u061c");
}

static void test_escape_invalid_utf8(void **state)
{
	(void)state;
	escaped("\xff\xfe", "\\xff\\xfe");
	escaped("\xc0\x80", "\\xc0\\x80");		     /* overlong NUL */
	escaped("\xe0\x80\xaf", "\\xe0\\x80\\xaf");	     /* overlong '/' */
	escaped("\xed\xa0\x80", "\\xed\\xa0\\x80");	     /* a surrogate */
	escaped("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* beyond U+10FFFF */
	escaped("\xe2\x80", "\\xe2\\x80");		     /* cut short at the end */
	escaped("\xe2\x80x", "\\xe2\\x80x");
	escaped("\x80", "\\x80");
}

static void test_escape_bounded(void **state)
{
	char big[5000], out[64];
	size_t n;

	(void)state;
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n = log_escape(big, out, sizeof(out));
	assert_int_equal(n, strlen(out));
	assert_true(n < sizeof(out));
	assert_string_equal(out + n - 3, "...");
	/* An escape is never cut in half. */
	memset(big, '\n', 100);
	big[100] = '\0';
	n = log_escape(big, out, sizeof(out));
	assert_int_equal((n - 3) % 4, 0);
	assert_string_equal(out + n - 3, "...");
	/* A multi-byte character neither. */
	strcpy(big, "\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5");
	n = log_escape(big, out, 9);
	assert_string_equal(out, "\xe6\x97\xa5...");
	assert_int_equal(log_escape("x", out, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_controls),
		cmocka_unit_test(test_escape_invisible),
		cmocka_unit_test(test_escape_invalid_utf8),
		cmocka_unit_test(test_escape_bounded),
	};

	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
