#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""lxcload: LXC's device hot-plug, timed in one process.

    lxcload.py -P LXCPATH -n N NAME NODE
    lxcload.py -P LXCPATH --once NAME NODE add|del

bench/run.sh times liblxc in-process with bench/lxcload (C, as devgate's
client is: liblxc forks its caller, and a python3 caller's fork costs
more); it uses this file for the one-shot command-line rows (--once).

Runs N cycles of liblxc's add_device_node(NODE) then
remove_device_node(NODE) on the running container NAME, the calls that
`lxc-device add` and `lxc-device del` make, without a process start per
call. NODE must exist on the host at the path it is to have in the
container (liblxc checks it). Prints one line per call:
    add <ns>     or     del <ns>
Exits 1 at the first call that fails. Needs the python3 that has the lxc
module (Debian's python3-lxc), run where the container's lxc-* commands
run (the same mount namespace). With --once, one add or del and no output:
a command line's way to make liblxc's call (lxc-device fails here before
it; bench/NOTES.md), timed from outside.
"""
import argparse
import sys
import time

import lxc


def main():
    p = argparse.ArgumentParser(prog="lxcload.py")
    p.add_argument("-P", dest="lxcpath", required=True)
    p.add_argument("-n", dest="cycles", type=int, default=200)
    p.add_argument("--once", action="store_true")
    p.add_argument("name")
    p.add_argument("node")
    p.add_argument("kind", nargs="?", choices=("add", "del"))
    a = p.parse_args()

    c = lxc.Container(a.name, a.lxcpath)
    if not c.running:
        print(f"lxcload: container '{a.name}' is not running", file=sys.stderr)
        return 1
    if a.once:
        call = c.add_device_node if a.kind == "add" else c.remove_device_node
        if not call(a.node):
            print(f"lxcload: {a.kind} of '{a.node}' failed", file=sys.stderr)
            return 1
        return 0
    clock = time.perf_counter_ns
    lines = []
    for _ in range(a.cycles):
        for kind, call in (("add", c.add_device_node), ("del", c.remove_device_node)):
            t0 = clock()
            ok = call(a.node)
            took = clock() - t0
            if not ok:
                print(f"lxcload: {kind} of '{a.node}' failed", file=sys.stderr)
                sys.stdout.write("".join(lines))
                return 1
            lines.append(f"{kind} {took}\n")
    sys.stdout.write("".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
