#!/usr/bin/env python3
"""A minimal raw iSCSI initiator for bad-input tests that libiscsi's tools cannot
express: a READ(16) past the end, a 2^32-1 block transfer length, an oversized PDU.

usage: iscsi_probe.py HOST:PORT TARGET_IQN [wce|readonly|sessions|pr-register KEY|pr-keys]
(with `wce`: print the Caching mode page's WCE bit and exit;
 `pr-register KEY`: PERSISTENT RESERVE OUT REGISTER of the hex KEY for this I_T nexus;
 `pr-keys`: print the registered keys (PERSISTENT RESERVE IN READ KEYS) in hex, one
 line, "none" if there are none;
 `readonly`: a write is refused with DATA PROTECT and MODE SENSE shows WP, reads work;
 `sessions`: a second connection to a live session (MC/S) is refused with "too many
 connections", one naming an unknown session with "session does not exist", and two
 sessions of different ISIDs share the LUN: what one writes, the other reads)
Prints one line per check and exits 1 if any check failed.
"""
import socket
import struct
import sys

INITIATOR = "iqn.2026-11.org.cachalot:probe"


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed")
        b += c
    return b


def read_pdu(s):
    bhs = recv_exact(s, 48)
    ahs = bhs[4] * 4
    dlen = int.from_bytes(bhs[5:8], "big")
    rest = recv_exact(s, ahs + dlen + (-dlen % 4))
    return bhs, rest[ahs : ahs + dlen]


def pdu(op, flags, itt, lun=0, data=b"", fields=b""):
    bhs = bytearray(48)
    bhs[0] = op
    bhs[1] = flags
    bhs[5:8] = len(data).to_bytes(3, "big")
    bhs[8:16] = lun.to_bytes(8, "big")
    bhs[16:20] = itt.to_bytes(4, "big")
    bhs[20 : 20 + len(fields)] = fields
    return bytes(bhs) + data + b"\0" * (-len(data) % 4)


class LoginRefused(RuntimeError):
    def __init__(self, status_class, detail):
        super().__init__(f"login refused: class {status_class} detail {detail}")
        self.status = (status_class, detail)


class Session:
    def __init__(self, addr, target, isid=0x1234, tsih=0):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.itt = 1
        self.cmdsn = 1
        self.isid = bytes([0x80, 0, 0]) + isid.to_bytes(2, "big") + b"\0"
        self.tsih = tsih
        keys = [f"InitiatorName={INITIATOR}", "SessionType=Normal", f"TargetName={target}", "AuthMethod=None"]
        self.login(0x80 | (0 << 2) | 1, keys)
        ops = ["HeaderDigest=None", "DataDigest=None", "MaxRecvDataSegmentLength=262144",
               "ImmediateData=Yes", "InitialR2T=Yes", "MaxBurstLength=262144", "FirstBurstLength=65536"]
        self.login(0x80 | (1 << 2) | 3, ops)

    def login(self, flags, keys):
        data = b"".join(k.encode() + b"\0" for k in keys)
        fields = b"\0" * 4 + struct.pack(">I", self.cmdsn) + b"\0" * 4  # CID, CmdSN, ExpStatSN
        b = bytearray(pdu(0x43, flags, self.itt, 0, data, fields))
        b[8:14] = self.isid
        b[14:16] = self.tsih.to_bytes(2, "big")
        b[2] = b[3] = 0
        self.s.sendall(bytes(b))
        bhs, _ = read_pdu(self.s)
        if bhs[0] & 0x3F != 0x23 or bhs[36] != 0:
            raise LoginRefused(bhs[36], bhs[37])
        self.tsih = int.from_bytes(bhs[14:16], "big")
        self.itt += 1

    def command(self, cdb, edtl, write=False, data=b""):
        """Send a SCSI command; return (status, sense bytes, data-in bytes)."""
        cdb = cdb + b"\0" * (16 - len(cdb))
        flags = 0x80 | (0x20 if write else 0x40)
        fields = struct.pack(">III", edtl, self.cmdsn, 0) + cdb
        self.s.sendall(pdu(0x01, flags, self.itt, 0, data, fields))
        self.itt += 1
        self.cmdsn += 1
        got = b""
        while True:
            bhs, d = read_pdu(self.s)
            op = bhs[0] & 0x3F
            if op == 0x25:  # Data-In
                got += d
                if bhs[1] & 0x01:
                    return bhs[3], b"", got
            elif op == 0x21:  # SCSI Response
                sense = d[2 : 2 + int.from_bytes(d[0:2], "big")] if len(d) >= 2 else b""
                return bhs[3], sense, got
            elif op == 0x31:  # R2T: this probe never sends solicited data
                return "r2t", b"", got
            else:
                raise RuntimeError(f"unexpected opcode {op:#x}")


def wce(addr, target):
    """Print the Caching mode page's WCE bit (MODE SENSE(6), page 0x08)."""
    s = Session(addr, target)
    st, _, d = s.command(bytes([0x1A, 0x08, 0x08, 0, 255, 0]), 255)
    if st != 0:
        sys.exit(f"MODE SENSE failed with status {st}")
    page = d[4 + d[3] :]  # after the header and block descriptor
    if page[0] & 0x3F != 0x08:
        sys.exit(f"not the caching page: {page[:4].hex()}")
    print(1 if page[2] & 0x04 else 0)


def pr_register(addr, target, key):
    """PR OUT REGISTER (service action 0): reservation key 0, new key KEY."""
    s = Session(addr, target)
    params = struct.pack(">QQ4xB3x", 0, key, 0)
    st, sense, _ = s.command(bytes([0x5F, 0x00, 0]) + b"\0" * 2 + struct.pack(">I", len(params)),
                             len(params), True, params)
    if st != 0:
        sys.exit(f"PR OUT REGISTER failed with status {st} sense {sense[:14].hex()}")


def pr_keys(addr, target):
    """Print the keys PR IN READ KEYS (service action 0) returns."""
    s = Session(addr, target)
    st, _, d = s.command(bytes([0x5E, 0x00]) + b"\0" * 5 + struct.pack(">H", 1024) + b"\0", 1024)
    if st != 0 or len(d) < 8:
        sys.exit(f"PR IN READ KEYS failed with status {st}")
    n = int.from_bytes(d[4:8], "big")
    keys = [d[8 + i : 16 + i].hex() for i in range(0, n, 8)]
    print(" ".join(keys) if keys else "none")


FAILURES = 0


def check(name, ok, detail=""):
    global FAILURES
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    FAILURES += 0 if ok else 1


def readonly(addr, target):
    """A read-only LU (a volume snapshot): writes refused with DATA PROTECT."""
    s = Session(addr, target)
    st, _, d = s.command(bytes([0x1A, 0x00, 0x3F, 0, 255, 0]), 255)
    check("MODE SENSE: the WP bit is set", st == 0 and len(d) > 2 and d[2] & 0x80 != 0)
    st, _, d = s.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096)
    check("READ(10) works", st == 0 and len(d) == 4096)
    print(f"first-bytes {d[:4].hex()}")
    for name, cdb in [
        ("WRITE(10)", bytes([0x2A, 0, 0, 0, 0, 0, 0, 0, 1, 0])),
        ("WRITE(16)", bytes([0x8A, 0]) + struct.pack(">QI", 8, 1)),
    ]:
        st, sense, _ = s.command(cdb, 512, True, b"w" * 512)
        check(f"{name} -> DATA PROTECT / WRITE PROTECTED", st == 2 and len(sense) >= 14
              and sense[2] & 0xF == 7 and sense[12] == 0x27, f"sense {sense[:14].hex()}")
    st, sense, _ = s.command(bytes([0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0]), 24, True,
                             struct.pack(">HH4x", 22, 16) + struct.pack(">QI4x", 0, 8))
    check("UNMAP -> DATA PROTECT", st == 2 and len(sense) >= 14 and sense[2] & 0xF == 7,
          f"sense {sense[:14].hex()}")
    st, _, d = s.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096)
    check("the data did not change", st == 0 and not d.startswith(b"w" * 512))


def sessions(addr, target):
    """MaxConnections=1: MC/S refused cleanly; several sessions share one LU."""
    a = Session(addr, target, isid=0x1111)
    check("session A logged in", a.tsih != 0, f"TSIH {a.tsih}")
    try:
        Session(addr, target, isid=0x1111, tsih=a.tsih)
        check("a second connection to session A is refused", False, "it logged in")
    except LoginRefused as e:
        check("a second connection to session A is refused: too many connections",
              e.status == (2, 6), str(e))
    try:
        Session(addr, target, isid=0x3333, tsih=(a.tsih + 1000) & 0xFFFF or 1)
        check("a connection naming an unknown session is refused", False, "it logged in")
    except LoginRefused as e:
        check("a connection naming an unknown session is refused: session does not exist",
              e.status == (2, 10), str(e))
    st, _, _ = a.command(bytes([0x00]), 0)
    check("session A still works", st == 0)
    b = Session(addr, target, isid=0x2222)
    check("session B (another ISID) logged in beside A", b.tsih not in (0, a.tsih), f"TSIH {b.tsih}")
    block = bytes(range(256)) * 2
    for writer, reader, lba in [(a, b, 100), (b, a, 101)]:
        data = bytes([lba]) + block[1:]
        st, _, _ = writer.command(bytes([0x8A, 0x08]) + struct.pack(">QI", lba, 1), 512, True, data)
        check(f"write of LBA {lba} (FUA)", st == 0)
        st, _, d = reader.command(bytes([0x88, 0]) + struct.pack(">QI", lba, 1), 512)
        check(f"the other session reads LBA {lba} as written", st == 0 and d == data)


def main():
    addr, target = sys.argv[1], sys.argv[2]
    if sys.argv[3:] == ["wce"]:
        return wce(addr, target)
    if sys.argv[3:4] == ["pr-register"] and len(sys.argv) == 5:
        return pr_register(addr, target, int(sys.argv[4], 16))
    if sys.argv[3:] == ["pr-keys"]:
        return pr_keys(addr, target)
    if sys.argv[3:] == ["readonly"]:
        readonly(addr, target)
        sys.exit(1 if FAILURES else 0)
    if sys.argv[3:] == ["sessions"]:
        sessions(addr, target)
        sys.exit(1 if FAILURES else 0)

    s = Session(addr, target)
    st, _, cap = s.command(bytes([0x9E, 0x10]) + b"\0" * 8 + struct.pack(">I", 32), 32)
    last = struct.unpack(">Q", cap[:8])[0]
    check("read capacity(16)", st == 0, f"last LBA {last}")

    def oob(status, sense):
        return status == 2 and len(sense) >= 14 and sense[2] & 0xF == 5 and sense[12] == 0x21

    st, sense, _ = s.command(bytes([0x88, 0]) + struct.pack(">QI", last, 2), 1024)
    check("READ(16) of 2 blocks at the last LBA -> LBA OUT OF RANGE", oob(st, sense))
    st, sense, _ = s.command(bytes([0x88, 0]) + struct.pack(">QI", last + 1, 1), 512)
    check("READ(16) past the end -> LBA OUT OF RANGE", oob(st, sense))
    st, sense, _ = s.command(bytes([0x88, 0]) + struct.pack(">QI", 0, 0xFFFFFFFF), 1 << 20)
    check("READ(16) of 2^32-1 blocks -> CHECK CONDITION", st == 2, f"sense {sense[:14].hex()}")
    st, sense, _ = s.command(bytes([0x8A, 0]) + struct.pack(">QI", 0, 0xFFFFFFFF), 512, True, b"x" * 512)
    check("WRITE(16) of 2^32-1 blocks -> CHECK CONDITION, no R2T", st == 2, f"sense {sense[:14].hex()}")
    st, sense, _ = s.command(bytes([0x88, 0]) + struct.pack(">QI", (1 << 64) - 1, 1), 512)
    check("READ(16) at LBA 2^64-1 -> LBA OUT OF RANGE", oob(st, sense))
    st, _, d = s.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096)
    check("READ(10) in range still works", st == 0 and len(d) == 4096)

    # A PDU announcing a 16 MiB data segment: refused by closing, before allocating.
    s.s.sendall(pdu(0x00, 0x80, 0x77, 0, b"", b"") [:5] + b"\xff\xff\xff" + b"\0" * 40)
    try:
        read_pdu(s.s)
        check("oversized data segment -> connection closed", False)
    except (EOFError, ConnectionResetError, socket.timeout) as e:
        check("oversized data segment -> connection closed", not isinstance(e, socket.timeout))
    s2 = Session(addr, target)
    st, _, _ = s2.command(bytes([0x00]), 0)
    check("a new session works after the bad one", st == 0)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
