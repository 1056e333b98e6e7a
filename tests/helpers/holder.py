#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""holder.py HOW DEVICE CGROUP: a process that holds DEVICE inside CGROUP
without ever opening it there, the ways a shortcut of revoke's holder scan
could miss. It goes to the background in a session of its own and prints its
PID once it holds the device in the cgroup.

HOW is one of:
  moved   opens DEVICE, then moves into CGROUP (an fd born outside);
  passed  moves into CGROUP, then gets an fd of DEVICE over a unix socket
          (SCM_RIGHTS) from its parent, which opened it outside;
  mapped  maps DEVICE (MAP_PRIVATE), closes the fd, then moves into CGROUP;
  crowded opens 600 other files first, then DEVICE, then moves into CGROUP:
          its fd directory takes more than one getdents64 read, and DEVICE's
          descriptor is listed last.
"""
import ctypes
import os
import signal
import socket
import sys


def join(cgroup):
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def child(how, dev, cgroup, sock, ready):
    held = []
    if how == "moved":
        held.append(os.open(dev, os.O_RDONLY))
        join(cgroup)
    elif how == "crowded":
        held.extend(os.open("/dev/null", os.O_RDONLY) for _ in range(600))
        held.append(os.open(dev, os.O_RDONLY))
        join(cgroup)
    elif how == "passed":
        join(cgroup)
        sock.send(b"in")
        _, fds, _, _ = socket.recv_fds(sock, 16, 1)
        held.extend(fds)
    elif how == "mapped":
        # libc's mmap: Python's mmap object keeps a dup of the fd.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        fd = os.open(dev, os.O_RDONLY)
        if libc.mmap(None, 4096, 1, 2, fd, 0) in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap " + dev)
        os.close(fd)
        join(cgroup)
    else:
        raise SystemExit("holder.py: HOW is moved, passed, mapped or crowded")
    os.write(ready, b"%d\n" % os.getpid())
    os.close(ready)
    while True:
        signal.pause()


def main():
    how, dev, cgroup = sys.argv[1:4]
    parent, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        parent.close()
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = (there.fileno(), w)  # not bats' fd 3: bats waits on it
        for fd in range(3, 1024):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            child(how, dev, cgroup, there, w)
        finally:
            os._exit(1)
    os.close(w)
    there.close()
    if how == "passed":
        parent.recv(2)  # the child is in the cgroup now
        fd = os.open(dev, os.O_RDONLY)
        socket.send_fds(parent, [b"x"], [fd])
        os.close(fd)
    pid = os.read(r, 32).decode().strip()
    if not pid:
        raise SystemExit("holder.py: the holder did not start")
    print(pid)


main()
