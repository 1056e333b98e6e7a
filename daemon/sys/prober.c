// SPDX-License-Identifier: Apache-2.0
/*
 * The prober (prober.h). devgated keeps the probe nodes in a root-only
 * directory of its own under /dev (a mount that allows device nodes), made
 * once per node and checked by fstatat before each use. The prober shares
 * devgated's memory (CLONE_VM: no copy of its page tables) on a small stack
 * of its own, is cloned straight into the container's v2 cgroup (clone3
 * CLONE_INTO_CGROUP), moves itself into the v1 devices cgroup when there is
 * one, opens each node and writes the errnos into shared memory. It must
 * never enter the container's namespaces nor outlive this call, and only
 * raw system calls run in it (libc's errno is devgated's thread's).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "devgate.h"
#include "prober.h"
#include "util.h"

#define PROBE_DIR_TEMPLATE "/dev/.devgate-proof.XXXXXX"
#define PROBER_STACK ((size_t)64 * 1024)

/* The prober's answer, in memory both sides see. */
struct prober_msg {
	int join_v2; /* the fallback's write to the v2 cgroup.procs */
	int join_v1;
	int err[DG_MAX_NODES];
	int done; /* written last: a prober killed before it has not answered */
	uint64_t ns_start, ns_joined, ns_end; /* CLOCK_MONOTONIC: first step, joined, last step */
};

/* What the prober does, set up by devgated before the clone. */
struct prober_job {
	int procs_fd[2]; /* v2 (the fallback's) and v1 cgroup.procs, -1: none */
	int dirfd;
	const char *comm;
	const char *hold; /* a FIFO to open first (DEVGATE_TEST_PROBER_HOLD), or NULL */
	char names[DG_MAX_NODES][32];
	int flags[DG_MAX_NODES];
	size_t n;
	struct prober_msg *msg;
};

/* The directory of probe nodes, made on first use; the stack and answer page. */
static int probe_dirfd = -1;
static char probe_dir[sizeof(PROBE_DIR_TEMPLATE)];
static void *shared_area;

#if defined(__x86_64__)
/* A system call that leaves errno alone: the prober shares devgated's TLS. */
static inline long sys3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}
#else
/* Elsewhere the prober is a copy (no CLONE_VM): its errno is its own. */
static inline long sys3(long nr, long a, long b, long c)
{
	long r = syscall(nr, a, b, c);

	return r < 0 ? -errno : r;
}
#endif

/* Open flags that ask for the access the grant gives (read and write when 0). */
static int open_flags(uint32_t access)
{
	bool rd = !access || (access & DG_ACC_READ), wr = !access || (access & DG_ACC_WRITE);

	return (rd && wr ? O_RDWR : wr ? O_WRONLY : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
}

/* CLOCK_MONOTONIC in ns, by a raw system call (0 when it fails). */
__attribute__((no_sanitize("address"))) static uint64_t raw_now_ns(void)
{
	struct timespec ts = { 0 };

	(void)sys3(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The prober itself: raw system calls only, on its own stack. */
__attribute__((no_sanitize("address"))) static int prober_child(void *arg)
{
	struct prober_job *j = arg;
	struct prober_msg *m = j->msg;
	long r;

	m->ns_start = raw_now_ns();
	(void)sys3(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0);
	if (j->comm)
		(void)sys3(SYS_prctl, PR_SET_NAME, (long)j->comm, 0);
	for (int k = 0; k < 2; k++) {
		if (j->procs_fd[k] < 0)
			continue;
		r = sys3(SYS_write, j->procs_fd[k], (long)"0", 1);
		if (r != 1) {
			*(k ? &m->join_v1 : &m->join_v2) = r < 0 ? (int)-r : EIO;
			return 1;
		}
	}
	m->ns_joined = raw_now_ns();
	if (j->hold) {
		r = sys3(SYS_openat, AT_FDCWD, (long)j->hold, O_RDONLY | O_CLOEXEC);
		if (r >= 0)
			(void)sys3(SYS_close, r, 0, 0);
	}
	for (size_t i = 0; i < j->n; i++) {
		r = sys3(SYS_openat, j->dirfd, (long)j->names[i], j->flags[i]);
		m->err[i] = r < 0 ? (int)-r : 0;
		if (r >= 0)
			(void)sys3(SYS_close, r, 0, 0);
	}
	m->ns_end = raw_now_ns();
	__atomic_store_n(&m->done, 1, __ATOMIC_RELEASE);
	return 0;
}

#if defined(__x86_64__)
/*
 * clone3(args) or clone(a1..a5) (by nr) with CLONE_VM: the child starts on
 * the stack the arguments name, runs fn(arg) and exits with its value.
 * Returns the child's PID or -errno, in the parent only.
 */
static long clone_vm(long nr, long a1, long a2, long a3, long a4, long a5, int (*fn)(void *),
		     void *arg)
{
	register long rax __asm__("rax") = nr;
	register long rdi __asm__("rdi") = a1;
	register long rsi __asm__("rsi") = a2;
	register long rdx __asm__("rdx") = a3;
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r12 __asm__("r12") = (long)fn;
	register long r13 __asm__("r13") = (long)arg;

	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov %[exit], %%eax\n\t"
			 "syscall\n\t"
			 "ud2\n"
			 "1:"
			 : "+r"(rax)
			 : "r"(rdi), "r"(rsi), "r"(rdx), "r"(r10), "r"(r8), "r"(r12),
			   "r"(r13), [exit] "i"(SYS_exit)
			 : "rcx", "r11", "memory", "cc");
	return rax;
}
#endif

/*
 * Starts the prober in cgroup cgfd: clone3(CLONE_INTO_CGROUP), which puts
 * it there from its first instruction. Where a seccomp filter answers
 * clone3 with ENOSYS (systemd's RestrictNamespaces= does, since it cannot
 * read clone3's flags), a plain clone whose child joins through the
 * cgroup's cgroup.procs, opened here into j->procs_fd[0]; with cgfd -1 (a
 * host with cgroup v1 alone) the plain clone, which joins the v1 devices
 * cgroup only. Returns the PID or -errno; the child never returns.
 */
static long spawn(int cgfd, int *pidfd, struct prober_job *j)
{
	char *top = (char *)shared_area + PROBER_STACK;
	struct clone_args ca = {
		.flags = CLONE_INTO_CGROUP | CLONE_PIDFD,
		.pidfd = (uint64_t)(uintptr_t)pidfd,
		.exit_signal = SIGCHLD,
		.cgroup = (uint64_t)cgfd,
	};
	long pid = -ENOSYS;

	/* cgroup v1 alone (cgfd -1): no v2 cgroup to clone into; it joins the v1 one itself. */
	if (cgfd < 0)
		goto plain;
#if defined(__x86_64__)
	ca.flags |= CLONE_VM;
	ca.stack = (uint64_t)(uintptr_t)shared_area;
	ca.stack_size = PROBER_STACK;
	pid = clone_vm(SYS_clone3, (long)&ca, sizeof(ca), 0, 0, 0, prober_child, j);
#else
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0)
		_exit(prober_child(j));
	pid = pid < 0 ? -errno : pid;
#endif
	if (pid != -ENOSYS)
		return pid;
	j->procs_fd[0] = openat(cgfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (j->procs_fd[0] < 0)
		return -errno;
plain:
#if defined(__x86_64__)
	pid = clone_vm(SYS_clone, CLONE_VM | CLONE_PIDFD | SIGCHLD, (long)top, (long)pidfd, 0, 0,
		       prober_child, j);
#else
	(void)top;
	pid = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL, NULL);
	if (pid == 0)
		_exit(prober_child(j));
	pid = pid < 0 ? -errno : pid;
#endif
	return pid;
}

void prober_release(void)
{
	DIR *dir;
	struct dirent *e;
	int fd;

	if (probe_dirfd < 0)
		return;
	fd = openat(probe_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	while (dir && (e = readdir(dir)))
		if (e->d_name[0] != '.')
			(void)unlinkat(probe_dirfd, e->d_name, 0);
	if (dir)
		closedir(dir);
	else if (fd >= 0)
		close(fd);
	(void)rmdir(probe_dir);
	probe_dirfd = safe_close(probe_dirfd);
}

/* The directory of probe nodes: kept while it is still root's, 0700 and linked. */
static int probe_dir_open(struct dg_error *err)
{
	struct statvfs sv;
	struct stat st;

	if (probe_dirfd >= 0 && fstat(probe_dirfd, &st) == 0 && st.st_nlink > 0 && st.st_uid == 0 &&
	    (st.st_mode & 07777) == 0700)
		return 0;
	prober_release();
	memcpy(probe_dir, PROBE_DIR_TEMPLATE, sizeof(PROBE_DIR_TEMPLATE));
	if (!mkdtemp(probe_dir))
		return dg_error_set(err, DG_E_KERNEL, errno,
				    "cannot make a directory for the proof under /dev: %m");
	probe_dirfd = open(probe_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (probe_dirfd < 0) {
		int e = errno;

		(void)rmdir(probe_dir);
		return dg_error_set(err, DG_E_KERNEL, e, "cannot open %s: %s", probe_dir,
				    strerror(e));
	}
	if (statvfs(probe_dir, &sv) == 0 && (sv.f_flag & ST_NODEV)) {
		prober_release();
		return dg_error_set(err, DG_E_KERNEL, EACCES,
				    "cannot prove the grant: /dev is mounted nodev here");
	}
	return 0;
}

/* Names node's probe node in name, made (again) unless it is root's 0600 node of that number. */
static int probe_node(const struct dg_node *node, char *name, size_t len, struct dg_error *err)
{
	mode_t type = node->block ? S_IFBLK : S_IFCHR;
	dev_t dev = makedev(node->major, node->minor);
	struct stat st;

	snprintf(name, len, "%c%u:%u", node->block ? 'b' : 'c', node->major, node->minor);
	if (fstatat(probe_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if ((st.st_mode & S_IFMT) == type && st.st_rdev == dev && st.st_uid == 0 &&
		    (st.st_mode & 07777) == 0600)
			return 0;
		(void)unlinkat(probe_dirfd, name, 0);
	}
	if (mknodat(probe_dirfd, name, type | 0600, dev) < 0)
		return dg_error_set(err, DG_E_KERNEL, errno,
				    "cannot make the proof's node %u:%u: %m", node->major,
				    node->minor);
	return 0;
}

/* True when cgroup.events (evfd) says frozen; reading it again re-arms POLLPRI. */
static bool cgroup_frozen(int evfd)
{
	char buf[256];
	ssize_t k;

	if (evfd < 0 || lseek(evfd, 0, SEEK_SET) < 0)
		return false;
	k = read(evfd, buf, sizeof(buf) - 1);
	if (k <= 0)
		return false;
	buf[k] = '\0';
	return strstr(buf, "frozen 1") != NULL;
}

/*
 * Waits for the prober's end, at most timeout_ms; kills it at once when its
 * cgroup freezes (evfd signals each change of cgroup.events), or at the
 * limit; always reaps it. No errno is read before it ended: it shares ours.
 */
static void await(int pidfd, int evfd, int timeout_ms, struct prober_result *ret, siginfo_t *si)
{
	struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN },
			       { .fd = evfd, .events = POLLPRI } };
	int64_t until = (int64_t)(now_mono_ns() / 1000000) + timeout_ms;

	for (;;) {
		int left = (int)(until - (int64_t)(now_mono_ns() / 1000000));

		if (left <= 0) {
			ret->timed_out = true;
			break;
		}
		if (poll(p, evfd >= 0 ? 2 : 1, left) <= 0)
			continue;
		if (p[0].revents)
			break;
		if (p[1].revents && cgroup_frozen(evfd)) {
			ret->frozen = true;
			break;
		}
	}
	if (ret->timed_out || ret->frozen)
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	/* A frozen task dies of SIGKILL; the wait ends once it has. */
	while (waitid(P_PIDFD, (id_t)pidfd, si, WEXITED) < 0 && errno == EINTR)
		;
}

/* Where a run's time went, in us: t0, t1 around the clone, t2 once reaped. */
static void times_of(const struct prober_msg *m, uint64_t t0, uint64_t t1, uint64_t t2,
		     struct prober_times *ret)
{
	ret->clone_us = (uint32_t)((t1 - t0) / 1000);
	ret->to_run_us = m->ns_start > t0 ? (uint32_t)((m->ns_start - t0) / 1000) : 0;
	ret->joins_us = m->ns_joined > m->ns_start ? (uint32_t)((m->ns_joined - m->ns_start) / 1000)
						   : 0;
	ret->opens_us = m->ns_end > m->ns_joined ? (uint32_t)((m->ns_end - m->ns_joined) / 1000)
						 : 0;
	ret->reaped_us = t2 > m->ns_end ? (uint32_t)((t2 - m->ns_end) / 1000) : 0;
}

/* The stack and the answer, in one shared mapping made once. */
static int shared_open(struct dg_error *err)
{
	if (shared_area)
		return 0;
	void *p = mmap(NULL, PROBER_STACK + sizeof(struct prober_msg), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return dg_error_set(err, DG_E_INTERNAL, errno, "cannot map the prober's stack: %m");
	shared_area = p;
	return 0;
}

/* Sets j up: the probe nodes, their open flags, the answer zeroed. */
static int job_prepare(struct prober_job *j, const struct dg_node *nodes, size_t n,
		       struct dg_error *err)
{
	int r = shared_open(err);

	if (r == 0)
		r = probe_dir_open(err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = probe_node(&nodes[i], j->names[i], sizeof(j->names[i]), err);
		j->flags[i] = open_flags(nodes[i].access);
	}
	if (r < 0)
		return r;
	j->dirfd = probe_dirfd;
	j->n = n;
	j->msg = (struct prober_msg *)((char *)shared_area + PROBER_STACK);
	*j->msg = (struct prober_msg){ 0 };
	return 0;
}

int prober_run(int cgfd, int v1_procs_fd, const char *comm, const struct dg_node *nodes, size_t n,
	       int timeout_ms, struct prober_result *ret, struct dg_error *err)
{
	struct prober_job j = { .procs_fd = { -1, v1_procs_fd }, .comm = comm };
	auto_close int pidfd = -1, evfd = -1;
	siginfo_t si = { 0 };
	uint64_t t0, t1;
	long pid;
	int r;

	*ret = (struct prober_result){ 0 };
	if (n > DG_MAX_NODES)
		return dg_error_set(err, DG_E_INTERNAL, E2BIG, "too many nodes to prove");
	r = job_prepare(&j, nodes, n, err);
	if (r < 0)
		return r;
	j.hold = getenv("DEVGATE_TEST_PROBER_HOLD");
	/* Opened and read before the clone: any later change wakes the wait. */
	evfd = openat(cgfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
	if (cgroup_frozen(evfd)) {
		ret->frozen = true;
		return 0;
	}
	t0 = now_mono_ns();
	pid = spawn(cgfd, &pidfd, &j);
	t1 = now_mono_ns();
	if (j.procs_fd[0] >= 0)
		close(j.procs_fd[0]);
	if (pid < 0) {
		ret->join_v2 = (int)-pid;
		return 0;
	}
	await(pidfd, evfd, timeout_ms, ret, &si);
	if (ret->timed_out || ret->frozen)
		return 0;
	/* Only a prober that exited by itself after its last open has answered. */
	if (si.si_code != CLD_EXITED || !__atomic_load_n(&j.msg->done, __ATOMIC_ACQUIRE)) {
		ret->join_v2 = j.msg->join_v2;
		ret->join_v1 = j.msg->join_v1;
		ret->no_answer = !ret->join_v2 && !ret->join_v1;
		return 0;
	}
	memcpy(ret->err, j.msg->err, sizeof(ret->err));
	times_of(j.msg, t0, t1, now_mono_ns(), &ret->times);
	return 0;
}
