#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Attacks on devgated's sockets, and the probe that times root's requests
meanwhile; used by tests/integration/access.bats, metrics.bats and
bench/run.sh.

  sockflood.py watch SOCK N   N connections that each open a watch stream
  sockflood.py half SOCK N    N connections that each send half a request
  sockflood.py slow HOST:PORT N   N HTTP connections that trickle a request
                              header, one byte every 0.5 s
  sockflood.py scrape HOST:PORT N  N clients that GET /metrics in a loop
      Each runs until killed and opens a new connection for every one
      devgated cuts, as a determined attacker would. With --status FILE it
      writes "open K made M cut C" there every 0.1 s: K connections open
      (for watch: streams answered), M made in all, C cut by devgated.
  sockflood.py burst HOST:PORT N  N TCP connections at once that each send
      one byte and close; prints the seconds it took.
  sockflood.py probe SOCK N   N list requests, one connection each, one after
      another; prints each one's round trip in ns ("fail NS WHY" when it
      got no reply within 10 s).
"""
import errno
import os
import selectors
import socket
import struct
import sys
import time

LIST = b'{"v":1,"op":"list"}\n'
WATCH = b'{"v":1,"op":"watch"}\n'
HALF = b'{"v":1,"op":"li'


def tcp_addr(s):
    host, port = s.rsplit(":", 1)
    return host.strip("[]"), int(port)


class Flood:
    """Keeps N connections open, making a new one for each that ends."""

    def __init__(self, mode, addr, n, status):
        self.mode, self.n, self.status = mode, n, status
        self.unix = mode in ("watch", "half")
        self.addr = addr if self.unix else tcp_addr(addr)
        self.sel = selectors.DefaultSelector()
        self.made = self.cut = self.answered = 0
        self.conns = {}  # socket -> state
        self.last_status = 0.0

    def connect(self):
        fam = socket.AF_UNIX if self.unix else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(self.addr)
        except BlockingIOError:
            pass
        except OSError as e:
            s.close()
            # The listen queue is full (that is devgated's to drain), or
            # devgated is gone: try again at the next turn.
            if e.errno in (errno.EAGAIN, errno.ECONNREFUSED, errno.ENOENT):
                return False
            raise
        self.made += 1
        st = {"sent": 0, "next": 0.0, "streaming": False, "buf": b""}
        self.conns[s] = st
        self.sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, st)
        return True

    def drop(self, s):
        st = self.conns.pop(s)
        if st["streaming"]:
            self.answered -= 1
        self.sel.unregister(s)
        s.close()
        self.cut += 1

    def payload(self):
        if self.mode == "watch":
            return WATCH
        if self.mode == "half":
            return HALF
        if self.mode == "scrape":
            return b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        return b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 4096

    def write(self, s, st, now):
        data = self.payload()
        if st["sent"] >= len(data) or now < st["next"]:
            return
        # slow: one byte every 0.5 s; the others all at once.
        chunk = data[st["sent"]:st["sent"] + 1] if self.mode == "slow" else data[st["sent"]:]
        try:
            st["sent"] += s.send(chunk)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(s)
            return
        st["next"] = now + 0.5
        # All sent, or slow (which writes on its own clock): wait for reads only.
        if (st["sent"] >= len(data) or self.mode == "slow") and not st.get("quiet"):
            self.sel.modify(s, selectors.EVENT_READ, st)
            st["quiet"] = True

    def read(self, s, st):
        try:
            data = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.drop(s)
            return
        st["buf"] = (st["buf"] + data)[-4096:]
        if self.mode == "watch" and not st["streaming"] and b"\n" in st["buf"]:
            if b'"error"' in st["buf"].split(b"\n", 1)[0]:
                self.drop(s)
                return
            st["streaming"] = True
            self.answered += 1

    def run(self):
        while True:
            while len(self.conns) < self.n and self.connect():
                pass
            now = time.monotonic()
            for key, ev in self.sel.select(timeout=0.05):
                s, st = key.fileobj, key.data
                if s not in self.conns:
                    continue
                if ev & selectors.EVENT_READ:
                    self.read(s, st)
                if s in self.conns and ev & selectors.EVENT_WRITE:
                    self.write(s, st, now)
            if self.mode == "slow":
                for s, st in list(self.conns.items()):
                    if s in self.conns:
                        self.write(s, st, now)
            self.report(now)

    def report(self, now):
        if not self.status or now - self.last_status < 0.1:
            return
        self.last_status = now
        k = self.answered if self.mode == "watch" else len(self.conns)
        tmp = self.status + ".tmp"
        with open(tmp, "w") as f:
            f.write("open %d made %d cut %d\n" % (k, self.made, self.cut))
        os.rename(tmp, self.status)


def burst(addr, n):
    t0 = time.monotonic()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(tcp_addr(addr))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        try:
            s.send(b"G")
        except OSError:
            pass
        s.close()
    print("%.3f" % (time.monotonic() - t0))


def probe(path, n):
    for _ in range(n):
        t0 = time.monotonic_ns()
        why = ""
        try:
            s = socket.socket(socket.AF_UNIX)
            # Blocking, as devgatectl and the hook connect: a full listen
            # queue makes connect wait (up to SO_SNDTIMEO), not fail.
            tv = struct.pack("ll", 10, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            s.connect(path)
            s.sendall(LIST)
            buf = b""
            while not buf.endswith(b"\n"):
                d = s.recv(65536)
                if not d:
                    why = "closed"
                    break
                buf += d
            s.close()
            if not why and b'"error"' in buf:
                why = "error:" + buf[:200].decode(errors="replace").replace(" ", "_")
        except OSError as e:
            why = type(e).__name__
        ns = time.monotonic_ns() - t0
        print(("fail %d %s" % (ns, why)) if why else ns, flush=True)


def main():
    args = sys.argv[1:]
    status = None
    if len(args) >= 2 and args[0] == "--status":
        status, args = args[1], args[2:]
    if len(args) != 3:
        sys.exit(__doc__)
    mode, addr, n = args[0], args[1], int(args[2])
    if mode == "burst":
        burst(addr, n)
    elif mode == "probe":
        probe(addr, n)
    elif mode in ("watch", "half", "slow", "scrape"):
        Flood(mode, addr, n, status).run()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
