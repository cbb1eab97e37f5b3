# Sourced by install.sh and build-shells.sh.
# apt_retry ARGS…: apt-get that waits for the dpkg lock, and retries when another apt holds the lists lock
# (which DPkg::Lock::Timeout does not cover).
apt_retry() {
  local i
  for i in $(seq 1 60); do
    apt-get -o DPkg::Lock::Timeout=300 "$@" && return 0
    sleep 5
  done
  return 1
}
