#!/usr/bin/env bash
# timeout: 480
# Issue 14's MariaDB over NFSv4.1: test_nfs_mariadb_kernel.sh on a vers=4.1 mount
# (no nolock: InnoDB's lock on ibdata1 is a real NFSv4 byte-range lock). MariaDB in
# the QEMU guest initialises its data directory on our share and runs sysbench
# while a writer records every acknowledged insert; the daemon is killed with -9
# mid-load and restarted: the client reclaims its opens and InnoDB's lock in the
# grace period (nfs.locks shows the reclaim) and the load goes on; then mariadbd
# is killed too and restarted from a fresh mount: CHECK TABLE clean, every
# acknowledged insert present.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ARTIFACTS=${ARTIFACTS:-$HERE/../../test-artifacts/test_nfs4_mariadb_kernel}
NFS_VERS=4.1 exec bash "$HERE/test_nfs_mariadb_kernel.sh" "$@"
