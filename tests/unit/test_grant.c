// SPDX-License-Identifier: Apache-2.0
/*
 * The lease transactions (daemon/grant/) alone, with the kernel faked
 * (tests/unit/fakes): every step that can fail is made to fail, and what is
 * left afterwards must be exactly what was there before.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fakes/kernel_fakes.h"
#include "core/config.h"
#include "grant/grant.h"
#include "util.h"

#define CGID 77

static struct dg_gpu gpus[2];
static struct dg_inventory inv = { .host_root = "/fixture", .gpus = gpus, .n_gpus = 2 };
static struct daemon d;
static struct dg_config cfg;
static char changes[8][16]; /* lease_changed types, in order */
static size_t n_changes;

static void on_change(struct daemon *dd, const char *type, const struct lease *l,
		      const char *const *g, size_t n)
{
	(void)dd;
	(void)l;
	(void)g;
	(void)n;
	if (n_changes < 8)
		strcpy(changes[n_changes++], type);
}

static void set_gpu(unsigned int i)
{
	gpus[i] = (struct dg_gpu){
		.index = i, .minor = i, .vendor = 0x10de, .device = 0x2330, .arch = "hopper"
	};
	snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%08x-0000-0000-0000-000000000000", i);
	snprintf(gpus[i].pci, sizeof(gpus[i].pci), "0000:%02x:00.0", 0x18 + i);
	strcpy(gpus[i].model, "NVIDIA H100 80GB HBM3");
}

static int setup(void **state)
{
	(void)state;
	set_gpu(0);
	set_gpu(1);
	inv.majors = (struct dg_majors){
		.has_nvidia = true, .has_uvm = true, .nvidia = 195, .uvm = 510
	};
	inv.ctl[0] = (struct dg_node){ "nvidiactl", 195, 255 };
	inv.ctl[1] = (struct dg_node){ "nvidia-uvm", 510, 0 };
	inv.ctl[2] = (struct dg_node){ "nvidia-uvm-tools", 510, 1 };
	inv.n_ctl = 3;
	d = (struct daemon){ .inv = &inv, .hooks = { .lease_changed = on_change } };
	cfg.node_mode = 0666;
	d.cfg = &cfg;
	n_changes = 0;
	fake_reset(CGID, "/ctr");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	lease_table_clear(&d.leases);
	return 0;
}

static int grant(const char *sel, struct dg_error *err)
{
	struct dg_grant_req req = {
		.target = { .pid = 4242, .has_pid = true, .container = "job" },
		.gpus = sel,
	};
	struct dg_grant_reply out = { 0 };
	struct dg_arena a = { 0 };
	int r = grant_request(&d, &req, &out, &a, err);

	dg_arena_free(&a);
	return r;
}

static int revoke(const char *sel, struct dg_error *err)
{
	struct dg_revoke_req req = { .target = { .container = "job" }, .gpus = sel };
	struct dg_revoke_reply out = { 0 };
	struct dg_arena a = { 0 };
	int r = grant_revoke(&d, &req, &out, &a, err);

	dg_arena_free(&a);
	return r;
}

/* Nothing of devgate's anywhere: no grant, gate, node, record, lease or event. */
static void assert_untouched(void)
{
	assert_int_equal(fake.n_grants, 0);
	assert_int_equal(fake.n_guarded, 0);
	assert_int_equal(fake.n_nodes, 0);
	assert_int_equal(fake.n_saved, 0);
	assert_int_equal(d.leases.n, 0);
	assert_int_equal(fake.watched, 0);
	assert_int_equal(n_changes, 0);
	assert_int_equal(fake.pending, 0);
}

/* GPU 0's lease in full: four grants, a gate, four nodes, a record, a watch. */
static void assert_holds_gpu0(void)
{
	assert_true(fake_has_grant(CGID, 195, 0));
	assert_true(fake_has_grant(CGID, 195, 255));
	assert_true(fake_has_grant(CGID, 510, 0));
	assert_true(fake_has_grant(CGID, 510, 1));
	assert_int_equal(fake.n_grants, 4);
	assert_true(fake_is_guarded(CGID));
	assert_true(fake_has_node("nvidia0") && fake_has_node("nvidiactl"));
	assert_int_equal(fake.n_nodes, 4);
	assert_true(fake_is_saved(CGID));
	assert_int_equal(d.leases.n, 1);
	assert_int_equal(d.leases.v[0]->n_gpus, 1);
	assert_int_equal(fake.watched, 1);
}

static void test_grant_applies_every_step(void **state)
{
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(grant("0", &err), 0);
	assert_holds_gpu0();
	assert_int_equal(n_changes, 1);
	assert_string_equal(changes[0], "granted");
	/* The journal is gone once the record commits. */
	assert_int_equal(fake.pending, 0);
}

/* A first grant that fails at any step leaves nothing behind. */
static void first_grant_fails_at(const char *fn, int nth, enum dg_code code)
{
	struct dg_error err = { 0 };

	setup(NULL);
	fake_fail(fn, nth, -EIO);
	assert_true(grant("0", &err) < 0);
	assert_int_equal(err.code, code);
	assert_untouched();
	teardown(NULL);
}

static void test_first_grant_undo(void **state)
{
	(void)state;
	first_grant_fails_at("target", 1, DG_E_NO_TARGET);
	first_grant_fails_at("state_pending_save", 1, DG_E_STATE);
	first_grant_fails_at("nodes_create", 1, DG_E_KERNEL);
	first_grant_fails_at("bpfgate_grant_put", 1, DG_E_KERNEL);
	first_grant_fails_at("bpfgate_grant_put", 3, DG_E_KERNEL);
	first_grant_fails_at("guard_apply", 1, DG_E_KERNEL);
	/* The proof from inside finds the GPU still denied: rolled back whole. */
	first_grant_fails_at("prober_run", 1, DG_E_UNPROVEN);
	first_grant_fails_at("state_save", 1, DG_E_STATE);
}

/* A prober that cannot answer (pids.max, frozen, killed) is never a pass: rolled back, named. */
static void prober_fails(int r, const char *why)
{
	struct dg_error err = { 0 };

	setup(NULL);
	fake_fail("prober_run", 1, r);
	assert_true(grant("0", &err) < 0);
	assert_int_equal(err.code, DG_E_UNPROVEN);
	assert_non_null(strstr(err.message, why));
	assert_untouched();
	teardown(NULL);
}

static void test_proof_unanswered(void **state)
{
	(void)state;
	prober_fails(-EAGAIN, "is at its pids.max");
	prober_fails(-EBUSY, "is frozen (the prober was killed)");
	prober_fails(-ECHILD, "was killed before it answered");
}

/* A second grant that fails keeps the first whole, and adds nothing. */
static void second_grant_fails_at(const char *fn, int nth)
{
	struct dg_error err = { 0 };

	setup(NULL);
	assert_int_equal(grant("0", &err), 0);
	fake_fail(fn, nth, -EIO);
	assert_true(grant("1", &err) < 0);
	assert_holds_gpu0();
	assert_false(fake_has_grant(CGID, 195, 1));
	assert_false(fake_has_node("nvidia1"));
	assert_int_equal(n_changes, 1);
	teardown(NULL);
}

static void test_second_grant_undo(void **state)
{
	(void)state;
	second_grant_fails_at("nodes_create", 1);
	second_grant_fails_at("bpfgate_grant_put", 1);
	second_grant_fails_at("bpfgate_grant_put", 5);
	second_grant_fails_at("guard_apply", 1);
	second_grant_fails_at("state_save", 1);
}

/*
 * A revoke whose journal cannot be written changes nothing; once the
 * journal is written, the kernel side goes on even if the record cannot
 * follow, and the journal stays for the next start to finish.
 */
static void test_revoke_journal_first(void **state)
{
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(grant("0,1", &err), 0);
	fake_fail("state_revoking_mark", 1, -EIO);
	assert_true(revoke("1", &err) < 0);
	assert_int_equal(err.code, DG_E_STATE);
	assert_true(fake_has_grant(CGID, 195, 1));
	assert_true(fake_has_node("nvidia1"));
	assert_int_equal(d.leases.v[0]->n_gpus, 2);
	assert_int_equal(fake.revoking, 0);
	fake_fail("state_save", 1, -EIO);
	assert_int_equal(revoke("1", &err), 0);
	assert_false(fake_has_grant(CGID, 195, 1));
	assert_false(fake_has_node("nvidia1"));
	assert_int_equal(fake.revoking, CGID);
	assert_int_equal(revoke(NULL, &err), 0);
	assert_int_equal(fake.n_grants, 0);
	assert_false(fake_is_guarded(CGID));
	assert_int_equal(fake.revoking, 0);
}

/* A partial revoke keeps the control nodes; the last one removes everything. */
static void test_revoke_partial_then_all(void **state)
{
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(grant("0,1", &err), 0);
	assert_int_equal(revoke("1", &err), 0);
	assert_false(fake_has_grant(CGID, 195, 1));
	assert_false(fake_has_node("nvidia1"));
	assert_holds_gpu0();
	assert_int_equal(revoke(NULL, &err), 0);
	assert_int_equal(fake.n_grants, 0);
	assert_int_equal(fake.n_nodes, 0);
	assert_false(fake_is_guarded(CGID));
	assert_false(fake_is_saved(CGID));
	assert_int_equal(d.leases.n, 0);
	assert_int_equal(fake.watched, 0);
	assert_int_equal(n_changes, 3);
	assert_string_equal(changes[1], "revoked");
	assert_string_equal(changes[2], "released");
}

static void test_release(void **state)
{
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(grant("1", &err), 0);
	grant_release(&d, CGID, "container ended");
	assert_int_equal(fake.n_grants, 0);
	assert_false(fake_is_guarded(CGID));
	assert_false(fake_is_saved(CGID));
	assert_int_equal(d.leases.n, 0);
	assert_string_equal(changes[n_changes - 1], "released");
}

/* An exclusive GPU held by one lease is refused to another, with nothing changed. */
static void test_busy_gpu_refused(void **state)
{
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(grant("0", &err), 0);
	fake.target_cgid = CGID + 1;
	assert_int_equal(grant("0", &err), -EBUSY);
	assert_int_equal(err.code, DG_E_UNAVAILABLE);
	assert_false(fake_has_grant(CGID + 1, 195, 0));
	assert_false(fake_is_guarded(CGID + 1));
	fake.target_cgid = CGID;
	assert_holds_gpu0();
}

/* A lease with host devices only is a lease: granted, flagged, revoked in full. */
static void test_devices_only(void **state)
{
	const char *devs[] = { "/dev/full:/dev/myfull" };
	struct dg_grant_req req = {
		.target = { .pid = 4242, .has_pid = true, .container = "job" },
		.devices = devs,
		.n_devices = 1,
	};
	struct dg_grant_reply out = { 0 };
	struct dg_error err = { 0 };
	struct dg_arena a = { 0 };

	(void)state;
	assert_int_equal(grant_request(&d, &req, &out, &a, &err), 0);
	assert_int_equal(out.n_granted, 0);
	assert_int_equal(out.n_granted_devices, 1);
	assert_string_equal(out.granted_devices[0], "/dev/myfull");
	dg_arena_free(&a);
	assert_true(fake_has_grant(CGID, 1, 7));
	assert_int_equal(fake.n_grants, 1);
	assert_true(fake.devgrants);
	assert_true(fake_has_node("myfull"));
	assert_true(fake_is_guarded(CGID));
	assert_true(fake_is_saved(CGID));
	assert_int_equal(d.leases.n, 1);
	assert_int_equal(fake.watched, 1);
	/* A GPU-class host node is refused; nothing changes. */
	devs[0] = "/dev/full:/dev/nvidia0";
	assert_int_equal(grant_request(&d, &req, &out, &a, &err), -EINVAL);
	dg_arena_free(&a);
	assert_int_equal(fake.n_grants, 1);
	assert_int_equal(revoke(NULL, &err), 0);
	assert_int_equal(fake.n_grants, 0);
	assert_false(fake.devgrants);
	assert_false(fake_is_guarded(CGID));
	assert_int_equal(d.leases.n, 0);
}

static int grant_ttl(const char *sel, int64_t ttl, struct dg_error *err)
{
	struct dg_grant_req req = {
		.target = { .pid = 4242, .has_pid = true, .container = "job" },
		.gpus = sel,
		.ttl = ttl,
		.has_ttl = ttl > 0,
	};
	struct dg_grant_reply out = { 0 };
	struct dg_arena a = { 0 };
	int r = grant_request(&d, &req, &out, &a, err);

	dg_arena_free(&a);
	return r;
}

static int extend(int64_t by, int64_t ttl, struct dg_error *err)
{
	struct dg_extend_req req = {
		.target = { .container = "job" },
		.by = by,
		.has_by = by > 0,
		.ttl = ttl,
		.has_ttl = ttl > 0,
	};
	struct dg_extend_reply out = { 0 };
	struct dg_arena a = { 0 };
	int r = grant_extend(&d, &req, &out, &a, err);

	dg_arena_free(&a);
	return r;
}

/*
 * A ttl sets the expiry; a grant without one keeps it; extend moves it with
 * the lease taken out of the table and put back (its GPU counts stay
 * right); at expiry everything goes as in a full revoke, reported "expired".
 */
static void test_ttl_extend_expire(void **state)
{
	struct dg_error err = { 0 };
	const struct lease_use *u;
	int64_t t0 = now_wall_s(), e;

	(void)state;
	assert_int_equal(extend(60, 0, &err), -ENOENT); /* no lease yet */
	memset(&err, 0, sizeof(err));
	assert_int_equal(grant("0", &err), 0);
	assert_int_equal(extend(60, 0, &err), -ENOENT);
	assert_int_equal(err.code, DG_E_INVALID);
	assert_int_equal(d.leases.v[0]->expires, 0);
	memset(&err, 0, sizeof(err));
	assert_int_equal(grant_ttl("0", 100, &err), 0);
	e = d.leases.v[0]->expires;
	assert_true(e >= t0 + 100 && e <= t0 + 102);
	assert_int_equal(grant("1", &err), 0);
	assert_int_equal(d.leases.v[0]->expires, e);
	assert_int_equal(extend(50, 0, &err), 0);
	assert_int_equal(d.leases.v[0]->expires, e + 50);
	assert_string_equal(changes[n_changes - 1], "extended");
	u = lease_table_use(&d.leases, gpus[1].uuid);
	assert_non_null(u);
	assert_int_equal(u->n_exclusive, 1);
	assert_int_equal(extend(0, 10, &err), 0);
	assert_true(d.leases.v[0]->expires <= now_wall_s() + 11);
	/* by and ttl together, or neither: refused */
	assert_int_equal(extend(10, 10, &err), -EINVAL);
	assert_int_equal(extend(0, 0, &err), -EINVAL);
	assert_int_equal(d.leases.n, 1);
	/* A failed record keeps the old expiry. */
	e = d.leases.v[0]->expires;
	fake_fail("state_save", 1, -EIO);
	assert_true(extend(100, 0, &err) < 0);
	assert_int_equal(err.code, DG_E_STATE);
	assert_int_equal(d.leases.v[0]->expires, e);

	grant_expire(&d, CGID + 1); /* no such lease: nothing */
	assert_int_equal(d.leases.n, 1);
	grant_expire(&d, CGID);
	assert_int_equal(fake.n_grants, 0);
	assert_int_equal(fake.n_nodes, 0);
	assert_false(fake_is_guarded(CGID));
	assert_false(fake_is_saved(CGID));
	assert_int_equal(d.leases.n, 0);
	assert_int_equal(fake.revoking, 0);
	assert_string_equal(changes[n_changes - 1], "expired");
	u = lease_table_use(&d.leases, gpus[1].uuid);
	assert_true(!u || u->n_exclusive == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grant_applies_every_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_grant_undo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_proof_unanswered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_grant_undo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_journal_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_partial_then_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_devices_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy_gpu_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl_extend_expire, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
