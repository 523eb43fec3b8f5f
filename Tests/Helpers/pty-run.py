#!/usr/bin/env python3
"""Runs a command with a terminal as its controlling terminal and stdio, as a
user's shell would, and says afterwards whether anything was typed into that
terminal while it ran (TIOCSTI, CVE-2017-5226's class): prints a JSON object
with the command's exit status, the bytes waiting as the terminal's input (what
the shell would run next) and whether a marker text was echoed."""
import fcntl
import json
import os
import pty
import select
import sys
import termios
import tty

marker = sys.argv[1].encode()
command = sys.argv[2:]
master, slave = pty.openpty()
tty.setraw(slave)
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.close(master)
    os.execvp(command[0], command)
output = b""
status = None
while status is None:
    ready, _, _ = select.select([master], [], [], 0.1)
    if ready:
        try:
            output += os.read(master, 65536)
        except OSError:
            pass
    done, code = os.waitpid(pid, os.WNOHANG)
    if done:
        status = os.waitstatus_to_exitcode(code)
waiting = fcntl.ioctl(slave, termios.FIONREAD, b"\0\0\0\0")
pending = int.from_bytes(waiting, sys.byteorder)
typed = b""
if pending:
    os.set_blocking(slave, False)
    typed = os.read(slave, pending)
print(json.dumps({"status": status, "pending": pending, "typed": typed.decode("utf-8", "replace"),
                  "echoed": marker in output}))
