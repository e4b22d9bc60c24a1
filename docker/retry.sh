# Sourced by the docker/ scripts: `retry CMD...` runs a network step up to 5 times,
# waiting 2, 4, 8, 16 s between tries, so one hiccup of a mirror or index does not
# fail the run. The last failure is returned, loudly.
retry() {
    _try=1
    _wait=2
    while :; do
        "$@" && return 0
        _rc=$?
        if [ "$_try" -ge "${RETRY_TRIES:-5}" ]; then
            echo "retry: '$*' failed $_try times (exit $_rc)" >&2
            return "$_rc"
        fi
        echo "retry: '$*' failed (exit $_rc), try $((_try + 1)) in ${_wait}s" >&2
        sleep "$_wait"
        _try=$((_try + 1))
        _wait=$((_wait * 2))
    done
}
