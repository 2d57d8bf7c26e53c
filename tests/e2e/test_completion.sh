#!/usr/bin/env bash
# timeout: 120
# `cachalot completion bash` (generated from the clap definitions) loads in bash,
# registers a completion for `cachalot`, and completes, as COMP_WORDS/COMP_CWORD
# simulate a TAB: subcommands and options from the definitions, and the names of
# pools, datasets and snapshots from a running daemon where a command takes an
# existing one (none where it takes a new name, a property or a path). With no
# daemon it still completes commands and returns promptly.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WORK=$(mktmp)
SCRIPT=$WORK/cachalot.bash
assert_ok "$CACHALOT" completion bash >"$SCRIPT"
[[ -s $SCRIPT ]] || fail "empty completion script"
for shell in zsh fish; do
    [[ -n $("$CACHALOT" completion "$shell") ]] || fail "empty $shell completion"
done
assert_fails "$CACHALOT" completion tcsh

# complete_words WORD... : what TAB offers after WORD... (the last word is the one
# being completed), one candidate per line, from a fresh bash with only the script.
complete_words() {
    PATH=$(dirname "$CACHALOT"):$PATH bash --norc --noprofile -c '
        source "$1" || exit 1
        shift
        spec=$(complete -p cachalot) || exit 1
        fn=$(sed -n "s/.*-F \([^ ]*\).*/\1/p" <<<"$spec")
        COMP_WORDS=("$@")
        COMP_CWORD=$(($# - 1))
        COMP_LINE="$*"
        COMP_POINT=${#COMP_LINE}
        COMPREPLY=()
        "$fn" cachalot "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf "%s\n" "${COMPREPLY[@]}"' _ "$SCRIPT" "$@"
}
# offers WORDS... -- EXPECTED...: every EXPECTED is among the candidates.
offers() {
    local words=() got w
    while [[ $1 != -- ]]; do words+=("$1"); shift; done
    shift
    got=$(complete_words "${words[@]}")
    for w in "$@"; do
        grep -qxF -- "$w" <<<"$got" || fail "TAB after '${words[*]}' does not offer '$w'; got: $(tr '\n' ' ' <<<"$got")"
    done
}
# offers_none WORDS... -- UNWANTED...: no UNWANTED is among the candidates.
offers_none() {
    local words=() got w
    while [[ $1 != -- ]]; do words+=("$1"); shift; done
    shift
    got=$(complete_words "${words[@]}")
    for w in "$@"; do
        grep -qxF -- "$w" <<<"$got" && fail "TAB after '${words[*]}' offers '$w'; got: $(tr '\n' ' ' <<<"$got")"
    done
    return 0
}

note "registration and static completion (no daemon)"
spec=$(bash --norc --noprofile -c 'source "$1" && complete -p cachalot' _ "$SCRIPT")
assert_contains "$spec" "-F _cachalot_with_names" "complete -p cachalot"
export CACHALOT_SOCKET=$WORK/no-daemon.sock
offers cachalot po -- pool
offers cachalot "" -- pool create list get set destroy snapshot rollback clone mount completion
offers cachalot pool "" -- create import export list status scrub
offers cachalot pool sc -- scrub
offers cachalot list - -- -H -p -r -t -o
offers cachalot completion "" -- bash zsh fish
start=$(date +%s)
offers_none cachalot destroy t -- tank
(($(date +%s) - start < 5)) || fail "completion without a daemon took $(($(date +%s) - start)) s"

note "names from a running daemon"
start_daemon
assert_ok "$CACHALOT" pool create -s 256M tank "$WORK/d0.img"
assert_ok "$CACHALOT" create -p tank/mysql/data
assert_ok "$CACHALOT" create tank/mysql/log
assert_ok "$CACHALOT" snapshot tank/mysql/data@s1
offers cachalot pool export "" -- tank
offers cachalot pool status t -- tank
offers_none cachalot pool export "" -- tank/mysql
offers cachalot destroy tank/mysql/ -- tank/mysql/data tank/mysql/log tank/mysql/data@s1
offers_none cachalot destroy tank/mysql/d -- tank/mysql/log
offers cachalot rollback tank/mysql/data@ -- tank/mysql/data@s1
offers cachalot clone tank/mysql/data@ -- tank/mysql/data@s1
# get PROPS NAMES...: the property slot gets no names, every later slot does,
# also after options that take a value (-o FIELDS).
offers_none cachalot get "" -- tank
offers cachalot get recordsize t -- tank tank/mysql
offers cachalot get -o value recordsize tank/mysql tank/mysql/l -- tank/mysql/log
offers cachalot set recordsize=16K tank/mysql/d -- tank/mysql/data
offers cachalot --socket "$CACHALOT_SOCKET" list tank/ -- tank/mysql
# New names: no suggestions from existing ones.
offers_none cachalot create tank/ -- tank/mysql
offers_none cachalot create -o recordsize=16K tank/ -- tank/mysql
offers_none cachalot pool create t -- tank
# Names of another daemon: --socket is passed on.
CACHALOT_SOCKET=$WORK/no-daemon.sock offers cachalot --socket "$HOME_DIR/cachalot.sock" destroy t -- tank/mysql
stop_daemon
echo "PASS"
