#!/bin/sh
# apt-get that waits for another apt or dpkg (unattended upgrades right after a machine
# boots) instead of failing on its lock, up to APT_LOCK_WAIT seconds (default 600):
# - the dpkg lock: apt's own `-o DPkg::Lock::Timeout`;
# - the package lists' lock, which `apt-get update` takes and which that option does not
#   cover (apt 2.6, Debian 12: it fails at once): apt-get is run again, every 2 s, for as
#   long as it says that a lock is held.
# Any other failure is returned at once (callers retry network failures themselves).
#
#   sh tools/apt_get.sh [apt-get arguments]      (as root; make test and docker/*.sh use it)
set -u
wait_s=${APT_LOCK_WAIT:-600}
start=$(date +%s)
log=$(mktemp "${TMPDIR:-/tmp}/apt_get.XXXXXX")
status=$(mktemp "${TMPDIR:-/tmp}/apt_get.XXXXXX")
trap 'rm -f "$log" "$status"' EXIT
while :; do
    { apt-get -o DPkg::Lock::Timeout="$wait_s" "$@" 2>&1; echo $? >"$status"; } | tee "$log"
    rc=$(cat "$status")
    [ "$rc" = 0 ] && exit 0
    grep -q -e "Could not get lock" -e "Unable to lock" -e "Unable to acquire the dpkg" "$log" \
        || exit "$rc"
    if [ $(($(date +%s) - start)) -ge "$wait_s" ]; then
        echo "apt_get.sh: an apt lock was still held after ${wait_s} s" >&2
        exit "$rc"
    fi
    echo "apt_get.sh: another apt or dpkg holds its lock; waiting for it" >&2
    sleep 2
done
