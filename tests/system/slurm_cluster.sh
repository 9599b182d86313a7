#!/usr/bin/env bash
# A one-node Slurm on 127.0.0.1 for the tests: munged, slurmctld and slurmd
# with their configuration, keys, state and logs in one directory.
#
#   tests/system/slurm_cluster.sh start DIR   # DIR: an empty directory
#   export SLURM_CONF=DIR/slurm.conf          # then srun, sinfo, scancel...
#   tests/system/slurm_cluster.sh stop DIR
#
# Needs root and the packages of tests/system/install.sh. The node is
# called localhost and declares 4 CPUs whatever the machine has, so that
# `srun -n 3` fits on 2 cores. The daemons listen on ports that were free
# at start. `start` stops what it started when it fails; `stop` cancels the
# jobs, waits for their steps to end, then stops the daemons by the pids
# they wrote, and fails if one outlives SIGKILL.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}

[ $# = 2 ] || usage
action=$1
dir=$(realpath "$2")
export SLURM_CONF=$dir/slurm.conf

free_ports() {
  python3 -c '
import socket
sockets = [socket.socket() for _ in range(2)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in sockets))'
}

write_config() {
  local ctld_port slurmd_port
  read -r ctld_port slurmd_port < <(free_ports)
  cat > "$SLURM_CONF" <<EOF
ClusterName=slimtests
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups: the tasks are tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node is what this file says (4 CPUs), not what slurmd finds.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=tests Nodes=localhost Default=YES MaxTime=30 State=UP
EOF
}

start_munge() {
  mkdir -p "$dir/munge"
  chmod 755 "$dir/munge"  # The key in it is 0600.
  mungekey --create --keyfile="$dir/munge/key" >/dev/null
  # --force: munged refuses a socket in a directory that others cannot
  # enter (pytest's temporary directories are 0700); every client is root.
  munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/key" \
    --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" \
    --seed-file="$dir/munge/seed"
}

wait_until_idle() {
  local deadline=$((SECONDS + 60)) state=''
  while [ $SECONDS -lt $deadline ]; do
    state=$(sinfo --noheader --format=%T 2>/dev/null || true)
    if [ "$state" = idle ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "slurm_cluster.sh: the node is '$state', not idle, after 60 s" >&2
  return 1
}

start() {
  [ "$(id -u)" = 0 ] || { echo "slurm_cluster.sh: needs root" >&2; exit 1; }
  mkdir -p "$dir/state" "$dir/spool"
  write_config
  start_munge
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF" -N localhost
  wait_until_idle
}

# stop_pid NAME PIDFILE: SIGTERM, SIGKILL after 15 s; fails if it lives on.
stop_pid() {
  local name=$1 pidfile=$2 pid
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  sleep 1
  if kill -0 "$pid" 2>/dev/null; then
    echo "slurm_cluster.sh: $name (pid $pid) outlived SIGKILL" >&2
    return 1
  fi
}

cancel_jobs() {
  [ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" \
    2>/dev/null || return 0
  local jobs
  jobs=$(squeue --noheader --format=%i 2>/dev/null || true)
  [ -n "$jobs" ] || return 0
  # shellcheck disable=SC2086  # One job id per word.
  scancel $jobs || true
  for _ in $(seq 60); do
    [ -z "$(squeue --noheader --format=%i 2>/dev/null || true)" ] && return 0
    sleep 0.5
  done
  echo "slurm_cluster.sh: jobs still in the queue after 30 s: $jobs" >&2
  return 1
}

stop() {
  local status=0
  cancel_jobs || status=1
  stop_pid slurmd "$dir/slurmd.pid" || status=1
  stop_pid slurmctld "$dir/slurmctld.pid" || status=1
  stop_pid munged "$dir/munge/pid" || status=1
  return $status
}

# After a failed start: stop what started, show the ends of the logs.
failed_start() {
  stop || true
  tail -n 20 "$dir"/*.log "$dir/munge/log" >&2 2>/dev/null || true
}

case $action in
  start)
    trap 'status=$?; [ $status = 0 ] || failed_start' EXIT
    start
    ;;
  stop) stop ;;
  *) usage ;;
esac
