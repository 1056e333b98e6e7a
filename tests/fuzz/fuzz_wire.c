// SPDX-License-Identifier: Apache-2.0
/* The socket's decoders: a request line, and a reply or event line of every op. */
#include "fuzz.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = fuzz_text(data, size);
	struct dg_request req;
	struct dg_error err = { 0 };

	if (!line)
		return 0;
	if (dg_request_decode(line, &req, &err) == 0) {
		json_object *o = dg_request_encode(&req);

		json_object_put(o);
		dg_request_done(&req);
	}
	for (int op = 0; op < DG_OP_MAX; op++) {
		struct dg_arena a = { 0 };
		union dg_reply reply;
		union dg_stream_event ev;

		if (dg_reply_decode(op, line, &reply, &a, &err) == 0)
			json_object_put(dg_reply_encode(op, &reply));
		if (dg_event_decode(op, line, &ev, &a, &err) == 0)
			json_object_put(dg_event_encode(op, &ev));
		dg_arena_free(&a);
	}
	free(line);
	return 0;
}
