#!/bin/bash
# Guest side of tests/e2e/test_guest_harness.sh: exercises what run-in-guest.sh
# promises (arguments, environment, output, exit status, host files, the shared
# directory, the writable overlay, modules loaded on demand, the host's servers).
set -u
echo "out-line"
echo "err-line" >&2
printf 'arg[%s]\n' "$@"
echo "env[$TRICKY]"
echo "host=$GUEST_HOST guest=$CACHALOT_GUEST name=$(hostname) pwd=$PWD"
echo "host-file[$(cat "$HOST_FILE")]"
echo from-guest >"$SHARE/written"
echo overlay >"$HOST_FILE.guest-copy" && echo "overlay-write ok"
# ext4 and loop are loaded on first use (the kernel's request_module and busybox
# modprobe on PATH); xfs the same way in test_guest_clients.sh's iscsi part.
grep -q '^ext4 ' /proc/modules && echo "ext4 was loaded at boot"
modprobe loop
truncate -s 32M /tmp/fs.img
mkfs.ext4 -q -F /tmp/fs.img
mkdir -p /mnt/x
mount -o loop /tmp/fs.img /mnt/x && grep -q '^ext4 ' /proc/modules && echo "ext4-mounted"
umount /mnt/x
# A server on the host's 127.0.0.1, reached at 10.0.2.2.
exec 3<>"/dev/tcp/$GUEST_HOST/$ECHO_PORT"
echo ping >&3
read -r reply <&3
echo "reply[$reply]"
printf 'no-newline'
exit 7
