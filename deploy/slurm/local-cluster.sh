#!/usr/bin/env bash
# A single-node Slurm cluster from Debian's packages, for trying and testing
# deploy/slurm/thumbpipe.sbatch on one machine (as root).
#
#   deploy/slurm/local-cluster.sh start    # install what is missing, start munged, slurmctld, slurmd
#   eval "$(deploy/slurm/local-cluster.sh env)"   # SLURM_CONF for sbatch, squeue, sinfo
#   deploy/slurm/local-cluster.sh status
#   deploy/slurm/local-cluster.sh stop     # cancel jobs, stop the daemons by their recorded PIDs
#
# Everything lives in one folder: SLURM_LOCAL_DIR (default /tmp/thumbpipe-slurm).
# Ports: SLURM_LOCAL_CTLD_PORT (default 16817) and SLURM_LOCAL_SLURMD_PORT (16818).
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-${TMPDIR:-/tmp}/thumbpipe-slurm}
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-16817}
SLURMD_PORT=${SLURM_LOCAL_SLURMD_PORT:-16818}
NODE=$(hostname -s)
CONF=$DIR/slurm.conf

log() { echo "local-cluster: $*" >&2; }

# A daemon's PID from its pid file, or nothing (the file may vanish at any moment).
pid_of() {
    local file=$DIR/$1.pid pid=""
    [ -f "$file" ] && pid=$(cat "$file" 2>/dev/null || true)
    echo "$pid"
}

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

tails() {
    for f in "$DIR"/log/*.log; do
        [ -f "$f" ] || continue
        echo "---- $f (last 20 lines)" >&2
        tail -n 20 "$f" >&2 || true
    done
}

install() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

write_conf() {
    # The hardware line slurmd itself reports, declaring 90 % of the memory.
    local hw cpus memory
    hw=$(slurmd -C | head -n 1)
    cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
    memory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
    memory=$((memory * 9 / 10))
    cat >"$CONF" <<EOF
ClusterName=thumbpipe-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,sched_min_interval=100000
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_for() {
    local what=$1 seconds=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            log "timed out after ${seconds} s waiting for $what"
            tails
            return 1
        fi
        sleep 0.2
    done
}

node_idle() { sinfo -h -N -n "$NODE" -o '%t' 2>/dev/null | grep -qx 'idle'; }

start() {
    install
    if alive "$(pid_of slurmctld)"; then
        log "already running in $DIR"
        return 0
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR/state" "$DIR/spool/$NODE" "$DIR/log" "$DIR/munge"
    chmod 700 "$DIR/munge"
    mungekey -c -k "$DIR/munge/munge.key" 2>/dev/null || mungekey --create --keyfile="$DIR/munge/munge.key"
    chmod 400 "$DIR/munge/munge.key"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed" ||
        { log "munged did not start"; tails; return 1; }
    write_conf
    export SLURM_CONF=$CONF
    slurmctld -c -f "$CONF" || { log "slurmctld did not start"; tails; return 1; }
    wait_for "slurmctld (scontrol ping)" 30 sh -c 'scontrol ping | grep -q UP'
    slurmd -N "$NODE" -f "$CONF" || { log "slurmd did not start"; tails; return 1; }
    wait_for "node $NODE idle" 60 node_idle
    log "running in $DIR (node $NODE, slurmctld port $CTLD_PORT)"
}

stop() {
    export SLURM_CONF=$CONF
    if [ -f "$CONF" ] && alive "$(pid_of slurmctld)"; then
        scancel --full --quiet -u root 2>/dev/null || true
        local deadline=$((SECONDS + 30))
        while [ -n "$(squeue -h 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        # Job-step daemons leave their sockets in the spool until they are gone.
        while compgen -G "$DIR/spool/$NODE/*.[0-9]*" >/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    fi
    for daemon in slurmd slurmctld munged; do
        local pid
        pid=$(pid_of "$daemon")
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            local deadline=$((SECONDS + 15))
            while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
            if alive "$pid"; then
                log "$daemon ($pid) ignored SIGTERM; killing it"
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
    done
    log "stopped"
}

status() {
    export SLURM_CONF=$CONF
    for daemon in munged slurmctld slurmd; do
        local pid
        pid=$(pid_of "$daemon")
        if alive "$pid"; then echo "$daemon: running (pid $pid)"; else echo "$daemon: not running"; fi
    done
    if alive "$(pid_of slurmctld)"; then
        scontrol ping || true
        sinfo || true
    fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
env) echo "export SLURM_CONF=$CONF" ;;
pids) for d in munged slurmctld slurmd; do pid_of "$d"; done ;;
*)
    echo "usage: $0 start|stop|status|env" >&2
    exit 64
    ;;
esac
