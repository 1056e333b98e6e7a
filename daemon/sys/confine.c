// SPDX-License-Identifier: Apache-2.0
/*
 * seccomp for devgated: the filter devgated installs on itself after
 * start-up (an allow-list, with a few calls that kill it outright) and the
 * filter builder the node helper's list shares (node/nodes.c). It only
 * builds and installs filters; which calls a part of devgate may make is
 * decided by the lists here and in daemon/helper/.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "confine.h"
#include "log.h"
#include "util.h"

static bool active;

static const char *const mode_names[] = {
	[DG_SECCOMP_ON] = "on",
	[DG_SECCOMP_LOG] = "log",
	[DG_SECCOMP_OFF] = "off",
};

int confine_mode_parse(const char *s, int *mode)
{
	for (int m = 0; m < (int)ARRAY_SIZE(mode_names); m++) {
		if (strcmp(s, mode_names[m]) == 0) {
			*mode = m;
			return 0;
		}
	}
	return -EINVAL;
}

const char *confine_mode_name(int mode)
{
	return mode >= 0 && mode < (int)ARRAY_SIZE(mode_names) ? mode_names[mode] : "?";
}

/*
 * What devgated calls once it serves, found by reading the code and by
 * running the integration suite under --seccomp=log (ASan builds included).
 * Grouped by who needs it.
 */
static const int daemon_syscalls[] = {
	/* files: state records, /proc, /sys, cgroupfs, bpffs, the fixture host */
	SCMP_SYS(read),
	SCMP_SYS(write),
	SCMP_SYS(readv),
	SCMP_SYS(writev),
	SCMP_SYS(pread64),
	SCMP_SYS(pwrite64),
	SCMP_SYS(lseek),
	SCMP_SYS(open),
	SCMP_SYS(openat),
	SCMP_SYS(openat2),
	SCMP_SYS(close),
	SCMP_SYS(close_range),
	SCMP_SYS(fstat),
	SCMP_SYS(stat),
	SCMP_SYS(lstat),
	SCMP_SYS(newfstatat),
	SCMP_SYS(statx),
	SCMP_SYS(statfs),
	SCMP_SYS(fstatfs),
	SCMP_SYS(access),
	SCMP_SYS(faccessat),
	SCMP_SYS(faccessat2),
	SCMP_SYS(readlink),
	SCMP_SYS(readlinkat),
	SCMP_SYS(getdents64),
	SCMP_SYS(mkdir),
	SCMP_SYS(mkdirat),
	SCMP_SYS(rmdir),
	SCMP_SYS(unlink),
	SCMP_SYS(unlinkat),
	SCMP_SYS(rename),
	SCMP_SYS(renameat),
	SCMP_SYS(renameat2),
	SCMP_SYS(fsync),
	SCMP_SYS(fdatasync),
	SCMP_SYS(ftruncate),
	SCMP_SYS(fcntl),
	SCMP_SYS(dup),
	SCMP_SYS(dup2),
	SCMP_SYS(dup3),
	SCMP_SYS(flock),
	SCMP_SYS(chmod),
	SCMP_SYS(fchmod),
	SCMP_SYS(fchmodat),
	SCMP_SYS(chown),
	SCMP_SYS(fchown),
	SCMP_SYS(fchownat),
	SCMP_SYS(mknodat),
	SCMP_SYS(umask),
	SCMP_SYS(getcwd),
	SCMP_SYS(ioctl),
	SCMP_SYS(memfd_create),
	SCMP_SYS(pipe2),
	/* cgroups by id (open_by_handle_at) */
	SCMP_SYS(name_to_handle_at),
	SCMP_SYS(open_by_handle_at),
	/* the event loop */
	SCMP_SYS(epoll_create1),
	SCMP_SYS(epoll_ctl),
	SCMP_SYS(epoll_wait),
	SCMP_SYS(epoll_pwait),
	SCMP_SYS(epoll_pwait2),
	SCMP_SYS(poll),
	SCMP_SYS(ppoll),
	SCMP_SYS(select),
	SCMP_SYS(pselect6),
	SCMP_SYS(inotify_init1),
	SCMP_SYS(inotify_add_watch),
	SCMP_SYS(inotify_rm_watch),
	SCMP_SYS(timerfd_create),
	SCMP_SYS(timerfd_settime),
	SCMP_SYS(timerfd_gettime),
	SCMP_SYS(signalfd4),
	SCMP_SYS(eventfd2),
	/* the control socket, sd_notify, the metrics endpoint (libmicrohttpd) */
	SCMP_SYS(socket),
	SCMP_SYS(socketpair),
	SCMP_SYS(bind),
	SCMP_SYS(listen),
	SCMP_SYS(accept),
	SCMP_SYS(accept4),
	SCMP_SYS(connect),
	SCMP_SYS(shutdown),
	SCMP_SYS(getsockname),
	SCMP_SYS(getpeername),
	SCMP_SYS(getsockopt),
	SCMP_SYS(setsockopt),
	SCMP_SYS(sendto),
	SCMP_SYS(sendmsg),
	SCMP_SYS(sendmmsg),
	SCMP_SYS(recvfrom),
	SCMP_SYS(recvmsg),
	SCMP_SYS(recvmmsg),
	/* memory: glibc malloc, json-c, libbpf's ring buffer */
	SCMP_SYS(brk),
	SCMP_SYS(mmap),
	SCMP_SYS(munmap),
	SCMP_SYS(mprotect),
	SCMP_SYS(mremap),
	SCMP_SYS(madvise),
	/* BPF: gates, maps, the ring buffer, attach and detach */
	SCMP_SYS(bpf),
	/* targets: pidfds, namespaces; the node helper's fork and its own filter */
	SCMP_SYS(pidfd_open),
	SCMP_SYS(pidfd_send_signal),
	SCMP_SYS(kill),
	SCMP_SYS(tgkill),
	SCMP_SYS(clone),
	SCMP_SYS(clone3),
	SCMP_SYS(fork),
	SCMP_SYS(wait4),
	SCMP_SYS(waitid),
	SCMP_SYS(setns),
	/* nodes for containers in another user namespace (nodes.c, helper.c) */
	SCMP_SYS(fsopen),
	SCMP_SYS(fsconfig),
	SCMP_SYS(fsmount),
	SCMP_SYS(open_tree),
	SCMP_SYS(mount_setattr),
	SCMP_SYS(move_mount),
	SCMP_SYS(umount2), /* a node's bind mount, in a helper that forked from devgated */
	SCMP_SYS(fchdir),
	SCMP_SYS(setfsuid),
	SCMP_SYS(setfsgid),
	SCMP_SYS(capget),
	SCMP_SYS(capset),
	SCMP_SYS(prctl),
	SCMP_SYS(seccomp),
	/* signals, time, identity */
	SCMP_SYS(rt_sigaction),
	SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(rt_sigreturn),
	SCMP_SYS(sigaltstack),
	SCMP_SYS(restart_syscall),
	SCMP_SYS(alarm), /* the time limit of a question to an NVML probe started anew */
	SCMP_SYS(clock_gettime),
	SCMP_SYS(clock_getres),
	SCMP_SYS(gettimeofday),
	SCMP_SYS(time),
	SCMP_SYS(nanosleep),
	SCMP_SYS(clock_nanosleep),
	SCMP_SYS(getpid),
	SCMP_SYS(gettid),
	SCMP_SYS(getppid),
	SCMP_SYS(getuid),
	SCMP_SYS(geteuid),
	SCMP_SYS(getgid),
	SCMP_SYS(getegid),
	SCMP_SYS(getgroups),
	SCMP_SYS(uname),
	/* glibc (qsort asks sysinfo how much memory there is) and the sanitizer
	 * runtimes (LeakSanitizer lists threads with getdents at exit) */
	SCMP_SYS(sysinfo),
	SCMP_SYS(getdents),
	SCMP_SYS(futex),
	SCMP_SYS(getrandom),
	SCMP_SYS(rseq),
	SCMP_SYS(set_robust_list),
	SCMP_SYS(set_tid_address),
	SCMP_SYS(sched_yield),
	SCMP_SYS(sched_getaffinity),
	SCMP_SYS(getrlimit),
	SCMP_SYS(prlimit64),
	SCMP_SYS(exit),
	SCMP_SYS(exit_group),
#if defined(__SANITIZE_ADDRESS__)
	/* LeakSanitizer stops the process with ptrace at exit (test builds only) */
	SCMP_SYS(ptrace),
#endif
};

/* Never needed once devgated serves; each one would only serve an attacker. */
static const int fatal_syscalls[] = {
	SCMP_SYS(execve),	   SCMP_SYS(execveat),	  SCMP_SYS(process_vm_writev),
	SCMP_SYS(kexec_load),	   SCMP_SYS(init_module), SCMP_SYS(finit_module),
	SCMP_SYS(mount),	   SCMP_SYS(pivot_root),  SCMP_SYS(chroot),
	SCMP_SYS(swapon),	   SCMP_SYS(reboot),	  SCMP_SYS(keyctl),
	SCMP_SYS(add_key),	   SCMP_SYS(request_key), SCMP_SYS(userfaultfd),
	SCMP_SYS(perf_event_open),
#if !defined(__SANITIZE_ADDRESS__)
	SCMP_SYS(ptrace),
#endif
};

int confine_build(uint32_t dflt, const int *allow, size_t n_allow, const int *kill, size_t n_kill,
		  struct sock_fprog *prog, struct dg_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(dflt);
	auto_close int fd = -1;
	struct stat st = { 0 };
	void *buf;
	int r = 0;

	if (!ctx)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "cannot create a seccomp filter");
	for (size_t i = 0; i < n_allow && r == 0; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow[i], 0);
	for (size_t i = 0; i < n_kill && r == 0; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, kill[i], 0);
	/* libseccomp 2.5 exports to an fd only; read the program back. */
	fd = memfd_create("devgate-seccomp", MFD_CLOEXEC);
	if (r == 0 && fd < 0)
		r = -errno;
	if (r == 0)
		r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r == 0 && (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter)))
		r = -EIO;
	if (r != 0) /* libseccomp returns 0 or -errno */
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot build a seccomp filter: %s",
				    strerror(-r));
	buf = malloc((size_t)st.st_size);
	if (!buf || pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return dg_error_set(err, DG_E_INTERNAL, EIO, "cannot read the seccomp filter back");
	}
	prog->filter = buf;
	prog->len = (unsigned short)((size_t)st.st_size / sizeof(struct sock_filter));
	return 0;
}

int confine_daemon(int mode, struct dg_error *err)
{
	struct sock_fprog prog = { 0 };
	long s;
	int r;

	if (mode == DG_SECCOMP_OFF) {
		log_warning("seccomp off: devgated runs without its syscall filter");
		return 0;
	}
	r = confine_build(mode == DG_SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM),
			  daemon_syscalls, ARRAY_SIZE(daemon_syscalls), fatal_syscalls,
			  ARRAY_SIZE(fatal_syscalls), &prog, err);
	if (r < 0)
		return r;
	/* TSYNC: any thread a library started is confined too. */
	s = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (s == 0)
		s = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
	if (s != 0) /* > 0: the id of a thread that could not be synced */
		r = s < 0 ? -errno : -ESRCH;
	if (r < 0)
		dg_error_set(err, DG_E_INTERNAL, r, "cannot install devgated's seccomp filter: %s",
			     strerror(-r));
	free(prog.filter);
	if (r < 0)
		return r;
	active = true;
	if (mode == DG_SECCOMP_LOG)
		log_notice("seccomp log: calls outside the allow-list are logged by the kernel");
	else
		log_debug("seccomp filter installed: %zu calls allowed, %zu fatal",
			  ARRAY_SIZE(daemon_syscalls), ARRAY_SIZE(fatal_syscalls));
	return 0;
}

bool confine_active(void)
{
	return active;
}

int confine_own_signals(int mode)
{
	static const int calls[] = { SCMP_SYS(kill), SCMP_SYS(tkill), SCMP_SYS(tgkill) };
	scmp_filter_ctx ctx;
	int r = 0;

	if (mode == DG_SECCOMP_OFF)
		return 0;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	/* Each names the process (tkill: the thread) first; a single thread's id is its pid. */
	for (size_t i = 0; i < ARRAY_SIZE(calls) && r == 0; i++)
		r = seccomp_rule_add(ctx,
				     mode == DG_SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM),
				     calls[i], 1, SCMP_A0_32(SCMP_CMP_NE, (uint32_t)getpid()));
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}
