#!/usr/bin/env bash
# For CI and tests/e2e/test_install_modules.sh: makes both module systems a cluster may use available on
# this Debian machine, to load trlhpc's modulefiles with each. Debian's `lmod` and `environment-modules`
# packages conflict, so Lmod is installed (apt) and Environment Modules is only unpacked (dpkg -x, no
# install scripts) into /opt/environment-modules, where the test runs its modulecmd.tcl with tclsh.
# Where environment-modules is the installed one, Lmod is not installed (it would remove it) and the
# test uses the installed modulecmd.tcl. Run as root; idempotent; exit non-zero with a message on failure.
set -euo pipefail
say() { echo "install-module-systems: $*"; }
die() { echo "install-module-systems: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (apt-get)"
command -v apt-get >/dev/null || die "needs apt-get (Debian)"
UNPACKED=/opt/environment-modules
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
export DEBIAN_FRONTEND=noninteractive

if installed environment-modules; then
  say "environment-modules is installed; not installing lmod (the packages conflict)"
elif ! installed lmod; then
  say "installing lmod"
  apt-get install -y -qq lmod >/tmp/trlhpc-apt-lmod.log 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq lmod >/tmp/trlhpc-apt-lmod.log 2>&1; } \
    || die "apt-get install lmod failed (see /tmp/trlhpc-apt-lmod.log)"
fi
if ! installed environment-modules && [[ ! -f $UNPACKED/usr/lib/x86_64-linux-gnu/modulecmd.tcl ]]; then
  command -v tclsh8.6 >/dev/null || apt-get install -y -qq tcl8.6 >/dev/null || die "apt-get install tcl8.6 failed"
  say "unpacking environment-modules into $UNPACKED"
  tmp=$(mktemp -d)
  # apt-get download writes into the current directory as the _apt user when it can.
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download -q environment-modules >/dev/null 2>&1) || die "apt-get download environment-modules failed"
  mkdir -p "$UNPACKED"
  dpkg -x "$tmp"/environment-modules_*.deb "$UNPACKED"
  rm -rf "$tmp"
fi
say "Lmod: $(ls /usr/share/lmod/lmod/libexec/lmod 2>/dev/null || echo absent); Environment Modules:" \
    "$(ls /usr/lib/x86_64-linux-gnu/modulecmd.tcl $UNPACKED/usr/lib/x86_64-linux-gnu/modulecmd.tcl 2>/dev/null | head -n1)"
