# Helpers shared by the guest-side scripts in this folder (sourced; the guest sees
# the host's root over 9p, so the scripts find this file beside them).

# wait_file FILE SECONDS: status 0 once FILE exists, 1 if it did not within SECONDS.
# The host and the guests hand over through files in the shared RESULTS folder.
wait_file() {
    local i
    for ((i = 0; i < $2 * 5; i++)); do
        [[ -e $1 ]] && return 0
        sleep 0.2
    done
    return 1
}
