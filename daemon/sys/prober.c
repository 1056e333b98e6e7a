// SPDX-License-Identifier: Apache-2.0
/*
 * The prober (prober.h). devgated makes the nodes in a root-only directory
 * under /dev (a mount that allows device nodes); the prober is cloned
 * straight into the container's v2 cgroup (clone3 CLONE_INTO_CGROUP, no
 * window in devgated's own), moves itself into the v1 devices cgroup when
 * there is one, opens each node and writes the errnos to a pipe. The
 * device check runs on open by major:minor wherever the node lives. It
 * must never enter the container's namespaces nor outlive this call.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "devgate.h"
#include "prober.h"
#include "util.h"

#define PROBE_DIR_TEMPLATE "/dev/.devgate-proof.XXXXXX"

/* What the prober writes to the pipe. */
struct prober_msg {
	int join_v2; /* the fallback's write to the v2 cgroup.procs */
	int join_v1;
	int err[DG_MAX_NODES];
};

/* Open flags that ask for the access the grant gives (read and write when 0). */
static int open_flags(uint32_t access)
{
	bool rd = !access || (access & DG_ACC_READ), wr = !access || (access & DG_ACC_WRITE);

	return (rd && wr ? O_RDWR : wr ? O_WRONLY : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
}

/* The prober itself: only calls that are safe after a fork of a threaded process. */
static _Noreturn void prober_child(const int procs_fd[2], const char *comm, char (*paths)[64],
				   const int *flags, size_t n, int out)
{
	struct prober_msg m = { 0 };

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (comm)
		(void)prctl(PR_SET_NAME, comm);
	if (procs_fd[0] >= 0 && write(procs_fd[0], "0", 1) != 1)
		m.join_v2 = errno ? errno : EIO;
	if (!m.join_v2 && procs_fd[1] >= 0 && write(procs_fd[1], "0", 1) != 1)
		m.join_v1 = errno ? errno : EIO;
	for (size_t i = 0; i < n && !m.join_v1 && !m.join_v2; i++) {
		int fd = open(paths[i], flags[i]);

		m.err[i] = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
	_exit(write(out, &m, sizeof(m)) == (ssize_t)sizeof(m) ? 0 : 1);
}

/* Makes the nodes in a new root-only directory; dir gets its path. */
static int make_nodes(char *dir, const struct dg_node *nodes, size_t n, char (*paths)[64],
		      struct dg_error *err)
{
	struct statvfs sv;

	memcpy(dir, PROBE_DIR_TEMPLATE, sizeof(PROBE_DIR_TEMPLATE));
	if (!mkdtemp(dir))
		return dg_error_set(err, DG_E_KERNEL, errno,
				    "cannot make a directory for the proof under /dev: %m");
	if (statvfs(dir, &sv) == 0 && (sv.f_flag & ST_NODEV))
		return dg_error_set(err, DG_E_KERNEL, EACCES,
				    "cannot prove the grant: /dev is mounted nodev here");
	for (size_t i = 0; i < n; i++) {
		mode_t type = nodes[i].block ? S_IFBLK : S_IFCHR;

		snprintf(paths[i], sizeof(paths[i]), "%s/%zu", dir, i);
		if (mknod(paths[i], type | 0600, makedev(nodes[i].major, nodes[i].minor)) < 0)
			return dg_error_set(err, DG_E_KERNEL, errno,
					    "cannot make the proof's node %u:%u: %m",
					    nodes[i].major, nodes[i].minor);
	}
	return 0;
}

static void remove_nodes(const char *dir, char (*paths)[64], size_t n)
{
	for (size_t i = 0; i < n; i++)
		(void)unlink(paths[i]);
	(void)rmdir(dir);
}

/* Waits for the message or the prober's end, at most timeout_ms; kills it on a timeout. */
static void collect(int pidfd, int in, int timeout_ms, struct prober_msg *m,
		    struct prober_result *ret)
{
	struct pollfd p = { .fd = in, .events = POLLIN };
	int64_t until = (int64_t)(now_mono_ns() / 1000000) + timeout_ms;
	siginfo_t si;
	size_t got = 0;

	while (got < sizeof(*m)) {
		int left = (int)(until - (int64_t)(now_mono_ns() / 1000000));
		ssize_t k;

		if (left <= 0 || poll(&p, 1, left) == 0) {
			ret->timed_out = true;
			break;
		}
		k = read(in, (char *)m + got, sizeof(*m) - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	if (got < sizeof(*m))
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	ret->no_answer = got < sizeof(*m) && !ret->timed_out;
}

/*
 * Starts the prober: clone3(CLONE_INTO_CGROUP), which puts it in the cgroup
 * from its first instruction. Where a seccomp filter answers clone3 with
 * ENOSYS (systemd's RestrictNamespaces= does, since it cannot read clone3's
 * flags), a plain clone whose child joins through *procs_fd, the cgroup's
 * cgroup.procs opened here. The child returns 0; the parent its PID, or
 * -errno.
 */
static long spawn(int cgfd, int *pidfd, int *procs_fd)
{
	struct clone_args ca = {
		.flags = CLONE_INTO_CGROUP | CLONE_PIDFD,
		.pidfd = (uint64_t)(uintptr_t)pidfd,
		.exit_signal = SIGCHLD,
		.cgroup = (uint64_t)cgfd,
	};
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));

	if (pid >= 0 || errno != ENOSYS)
		return pid < 0 ? -errno : pid;
	*procs_fd = openat(cgfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (*procs_fd < 0)
		return -errno;
	pid = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL, NULL);
	return pid < 0 ? -errno : pid;
}

int prober_run(int cgfd, int v1_procs_fd, const char *comm, const struct dg_node *nodes, size_t n,
	       int timeout_ms, struct prober_result *ret, struct dg_error *err)
{
	char dir[sizeof(PROBE_DIR_TEMPLATE)];
	char paths[DG_MAX_NODES][64];
	int flags[DG_MAX_NODES];
	struct prober_msg m = { 0 };
	auto_close int pidfd = -1;
	int pipefd[2];
	long pid;
	int r;

	*ret = (struct prober_result){ 0 };
	if (n > DG_MAX_NODES)
		return dg_error_set(err, DG_E_INTERNAL, E2BIG, "too many nodes to prove");
	r = make_nodes(dir, nodes, n, paths, err);
	if (r < 0) {
		remove_nodes(dir, paths, 0);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		flags[i] = open_flags(nodes[i].access);
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		remove_nodes(dir, paths, n);
		return dg_error_set(err, DG_E_INTERNAL, errno, "cannot make a pipe: %m");
	}
	int procs_fd[2] = { -1, v1_procs_fd };
	pid = spawn(cgfd, &pidfd, &procs_fd[0]);
	if (pid == 0) {
		close(pipefd[0]);
		prober_child(procs_fd, comm, paths, flags, n, pipefd[1]);
	}
	if (procs_fd[0] >= 0)
		close(procs_fd[0]);
	close(pipefd[1]);
	if (pid < 0)
		ret->join_v2 = -(int)pid;
	else
		collect(pidfd, pipefd[0], timeout_ms, &m, ret);
	close(pipefd[0]);
	remove_nodes(dir, paths, n);
	if (pid < 0 || ret->timed_out || ret->no_answer)
		return 0;
	ret->join_v2 = m.join_v2;
	if (!ret->join_v1)
		ret->join_v1 = m.join_v1;
	memcpy(ret->err, m.err, sizeof(ret->err));
	return 0;
}
