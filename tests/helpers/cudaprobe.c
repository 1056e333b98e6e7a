// SPDX-License-Identifier: Apache-2.0
/*
 * cudaprobe: does CUDA work here? Loads libcuda.so.1 by soname (as any CUDA
 * program does), makes a context on each device it sees, allocates and
 * frees 64 MiB there, and prints one line per device. For real GPU hosts:
 * a fixture's libcuda has no CUDA in it. Exit 0 when every device worked.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*init_fn)(unsigned int);
typedef int (*count_fn)(int *);
typedef int (*get_fn)(int *, int);
typedef int (*name_fn)(char *, int, int);
typedef int (*mem_fn)(size_t *, int);
typedef int (*ctx_fn)(void **, unsigned int, int);
typedef int (*ctx_free_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
typedef int (*uuid_fn)(unsigned char *, int);

static void *sym(void *h, const char *name)
{
	void *f = dlsym(h, name);

	if (!f)
		printf("no %s in libcuda.so.1\n", name);
	return f;
}

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	init_fn init;
	count_fn count;
	get_fn get;
	name_fn name;
	mem_fn mem;
	ctx_fn ctx;
	ctx_free_fn ctx_free;
	alloc_fn alloc;
	free_fn release;
	int n = 0, r, bad = 0;

	if (!h) {
		printf("cuda: %s\n", dlerror());
		return 1;
	}
	init = (init_fn)sym(h, "cuInit");
	count = (count_fn)sym(h, "cuDeviceGetCount");
	get = (get_fn)sym(h, "cuDeviceGet");
	name = (name_fn)sym(h, "cuDeviceGetName");
	mem = (mem_fn)sym(h, "cuDeviceTotalMem_v2");
	ctx = (ctx_fn)sym(h, "cuCtxCreate_v2");
	ctx_free = (ctx_free_fn)sym(h, "cuCtxDestroy_v2");
	alloc = (alloc_fn)sym(h, "cuMemAlloc_v2");
	release = (free_fn)sym(h, "cuMemFree_v2");
	if (!init || !count || !get || !name || !mem || !ctx || !ctx_free || !alloc || !release)
		return 1;
	r = init(0);
	if (r != 0) {
		printf("cuda: cuInit failed: error %d\n", r);
		return 1;
	}
	if (count(&n) != 0 || n == 0) {
		printf("cuda: no device\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char model[128] = "";
		size_t total = 0;
		unsigned long long ptr = 0;
		void *c = NULL;
		int d = 0;

		r = get(&d, i);
		if (r == 0)
			r = name(model, sizeof(model), d);
		if (r == 0)
			r = mem(&total, d);
		if (r == 0)
			r = ctx(&c, 0, d);
		if (r == 0)
			r = alloc(&ptr, 64UL << 20);
		if (r == 0)
			r = release(ptr);
		if (c)
			ctx_free(c);
		printf("cuda device %d: %s, %zu MiB: %s (%d)\n", i, model, total >> 20,
		       r == 0 ? "context and 64 MiB allocation ok" : "failed", r);
		bad += r != 0;
	}
	return bad ? 1 : 0;
}
