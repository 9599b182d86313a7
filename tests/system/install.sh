#!/usr/bin/env bash
# Installs, from Debian's packages, the system tools the tests in this
# folder need. Run as root by `make test-system`; a second run installs
# nothing. Fails (never skips) when a package cannot be installed.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "tests/system/install.sh: needs root (the tests create network" \
       "namespaces and start system daemons); run make test-system as root" >&2
  exit 1
fi
packages=(iproute2 slurm-wlm munge)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null \
    | grep -q 'install ok installed' || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
