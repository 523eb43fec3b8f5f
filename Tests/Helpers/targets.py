#!/usr/bin/env python3
"""The world outside a worker, as a hostile decoder would go for it: a UDP port
on 127.0.0.1, a UNIX socket by path (a desktop's session bus, ssh-agent,
docker.sock) and an abstract one. Prints "PORT PATH NAME" once listening, waits
until stdin closes, then prints as JSON how many datagrams and connections
reached each. The sandbox tests judge the jail by this, never by the worker."""
import json
import os
import socket
import sys
import uuid

folder = sys.argv[1]
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
path = os.path.join(folder, "desktop.sock")
by_path = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
by_path.bind(path)
by_path.listen(16)
name = "thumbpipe-test-" + uuid.uuid4().hex
abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abstract.bind("\0" + name)
abstract.listen(16)
print(udp.getsockname()[1], path, name, flush=True)
sys.stdin.read()
reached = {"udp": [], "unix": 0, "abstract": 0}
for s in (udp, by_path, abstract):
    s.setblocking(False)
while True:
    try:
        data, _ = udp.recvfrom(65536)
        reached["udp"].append(data.decode("utf-8", "replace"))
    except BlockingIOError:
        break
for key, s in (("unix", by_path), ("abstract", abstract)):
    while True:
        try:
            connection, _ = s.accept()
            connection.close()
            reached[key] += 1
        except BlockingIOError:
            break
print(json.dumps(reached), flush=True)
