#!/usr/bin/env bash
# timeout: 300
# test_mysql_failover.sh with relationship db pulled (REPL_PULL=1): created on
# the target B with --pull, B starts each cycle from A's listener; A takes the
# `mysql snapshot` of its set; failover, resync and reverse on B.
export ARTIFACTS=${ARTIFACTS:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/test-artifacts/test_mysql_failover_pull}
REPL_PULL=1 exec bash "$(dirname "${BASH_SOURCE[0]}")/test_mysql_failover.sh"
