#!/usr/bin/env bash
# Installs the real launchers the suite's own tests start: Slurm with munge (a one-node cluster,
# tests/slurm_cluster.py) and OpenMPI, what makes two hosts on one machine for the multi-node
# tests (tests/two_hosts.py: ip and tc from iproute2; nsenter, unshare, taskset from util-linux;
# mount), and the container runtimes and image builder of the container tests
# (tests/container_images.py: bubblewrap, debootstrap; podman with runc; docker.io, whose daemon
# the docker tests start on their own: tests/docker_daemon.py), and the browser the history site's
# test opens it in (tests/test_publish_browser.py: chromium and its chromedriver).
# Debian packages; run as root; does nothing when present.
set -euo pipefail

packages=(slurm-wlm munge openmpi-bin iproute2 util-linux mount bubblewrap debootstrap podman runc
          docker.io chromium chromium-driver)
# Only the executables matter: the test cluster writes its own configuration and key.
needed=(slurmctld slurmd srun salloc sbatch squeue scancel sinfo scontrol munged mpirun
        ip tc nsenter unshare mount taskset bwrap debootstrap podman runc dockerd containerd
        chromium chromedriver)

missing=()
for program in "${needed[@]}"; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$program" >/dev/null || missing+=("$program")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-launchers.sh: ${missing[*]} not found and not root;" \
         "run it as root, or apt-get install ${packages[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# The packages' maintainer scripts start munge, slurm and docker services where an init system
# runs; the tests start their own daemons, so keep the packaged ones from starting (policy-rc.d).
policy=/usr/sbin/policy-rc.d
added_policy=false
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    added_policy=true
fi
trap '$added_policy && rm -f "$policy"' EXIT

apt-get update -qq
apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${packages[@]}" >/dev/null
