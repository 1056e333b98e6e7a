// SPDX-License-Identifier: Apache-2.0
/* The hook's input: the OCI state on stdin and the bundle's config.json. */
#include "fuzz.h"
#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size);
	struct oci_state s = { 0 };
	struct oci_config c = { 0 };
	struct oci_request r = { 0 };
	struct dg_error err = { 0 };

	if (!text)
		return 0;
	if (oci_state_parse(text, &s, &err) == 0)
		oci_state_done(&s);
	if (oci_config_parse(text, "/bundle", &c, &err) == 0) {
		if (oci_request(NULL, &c, true, &r, &err) == 0)
			oci_request_done(&r);
		oci_config_done(&c);
	}
	free(text);
	return 0;
}
