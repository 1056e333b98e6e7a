// SPDX-License-Identifier: Apache-2.0
/*
 * dlprobe: loads each library by the name given, as a CUDA program loads
 * libcuda.so.1, and prints "NAME ok VERSION" (the fixture library's
 * devgate_fake_driver()) or "NAME dlerror-text". Exit 1 if any failed.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int bad = 0;

	for (int i = 1; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW);
		const char *(*fn)(void) = h ? (const char *(*)(void))dlsym(h, "devgate_fake_driver")
					    : NULL;

		if (fn) {
			printf("%s ok %s\n", argv[i], fn());
		} else {
			printf("%s %s\n", argv[i], dlerror());
			bad = 1;
		}
	}
	return bad;
}
