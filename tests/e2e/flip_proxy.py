#!/usr/bin/env python3
"""A TCP forwarder that corrupts one byte in flight, for the replication tests.

    flip_proxy.py LISTEN_HOST:PORT TARGET_HOST:PORT ARMFILE

Every connection to LISTEN is forwarded to TARGET, both ways, byte for byte.
While ARMFILE exists (it holds a byte offset N), the first connection whose
client-to-server bytes reach offset N gets the bits of that byte inverted,
once; the proxy then renames ARMFILE to ARMFILE.done (its content: the
connection's number and the offset), so the test knows the flip happened and
the next connections pass unchanged. Connections that end before offset N
leave the arm in place.
"""

import os
import socket
import sys
import threading

ARM_LOCK = threading.Lock()


def addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def take_arm(armfile, seen, n):
    """The offset to flip within the n bytes after `seen`, if armed (claimed)."""
    with ARM_LOCK:
        try:
            with open(armfile) as f:
                off = int(f.read().strip())
        except (OSError, ValueError):
            return None
        if not seen <= off < seen + n:
            return None
        os.rename(armfile, armfile + ".done")
        return off


def pump(src, dst, armfile, conn_no, flip, other_done, done):
    """Copy src to dst until src ends. As a TCP peer does: the server's last
    words (an ERROR frame before it hung up) reach the client before the
    client's side is reset; the client-to-server pump closes the client only
    once the server-to-client one has finished."""
    seen = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if flip:
                off = take_arm(armfile, seen, len(data))
                if off is not None:
                    b = bytearray(data)
                    b[off - seen] ^= 0xFF
                    data = bytes(b)
                    with open(armfile + ".done", "w") as f:
                        f.write(f"connection {conn_no} offset {off}\n")
            dst.sendall(data)
            seen += len(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    done.set()
    other_done.wait(30)
    for s in (src, dst):
        try:
            s.close()
        except OSError:
            pass


def main():
    listen, target, armfile = addr(sys.argv[1]), addr(sys.argv[2]), sys.argv[3]
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(listen)
    srv.listen(16)
    conn_no = 0
    while True:
        client, _ = srv.accept()
        conn_no += 1
        try:
            server = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up, down = threading.Event(), threading.Event()
        threading.Thread(target=pump, args=(client, server, armfile, conn_no, True, down, up), daemon=True).start()
        threading.Thread(target=pump, args=(server, client, armfile, conn_no, False, up, down), daemon=True).start()


if __name__ == "__main__":
    main()
