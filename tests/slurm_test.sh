#!/usr/bin/env bash
# A sweep on a real Slurm cluster (issue 41, item 6): brings up a one-node
# cluster from Debian's packages on this machine (munged, slurmctld and
# slurmd, each in a scratch directory, on free ports, as this user),
# submits `alisa sweep --emit-jobs` as a job array (each task runs its line
# of the jobs file: one point into its own database), merges the parts with
# `alisa db merge`, and checks every point is there once and equal to a
# local run of the same spec (wall time aside). The commands are the ones
# experiments/README.md shows.
# Skips (77), saying why, where Slurm or munge is not installed
# (scripts/setup installs them: slurmctld slurmd slurm-client munge) or the
# daemons cannot start here; their logs are printed then.
# Usage: slurm_test.sh PATH/TO/alisa REPO_ROOT
set -u
alisa=$(realpath "$1")
root=$(cd "$2" && pwd)
for b in munged slurmctld slurmd sbatch sinfo scontrol; do
    command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
    command -v "$b" >/dev/null 2>&1 || {
        echo "SKIP: $b is not installed (scripts/setup installs slurmctld slurmd slurm-client munge)"
        exit 77
    }
done
tmp=$(mktemp -d)
chmod 700 "$tmp"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.5
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
check() { # check CONDITION-EXIT-CODE DESCRIPTION
    if [ "$1" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi
}
skip_with_logs() { # skip_with_logs WHY
    echo "SKIP: $1"
    for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done
    exit 77
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# munge: its own key, socket and files, as this user (--force: a scratch
# directory under /tmp is not the layout munged insists on)
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$tmp/munge.key"
munged --force --key-file="$tmp/munge.key" --socket="$tmp/munge.socket" \
    --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munge.seed" \
    >/dev/null 2>&1 || skip_with_logs "munged does not start here"
pids+=("$(cat "$tmp/munged.pid")")

node=$(hostname -s)
user=$(id -un)
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=alisatest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=alisa Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -i >"$tmp/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$node" >"$tmp/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 1 120); do
    sleep 0.5
    state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
    case $state in idle*) up=1; break ;; esac
done
[ "$up" -eq 1 ] || skip_with_logs "the one-node cluster did not come up (node state '${state:-none}')"
echo "slurm: one-node cluster up ($(sinfo -V), node $node, $(nproc) CPUs)"

cat >"$tmp/s.sweep" <<SPEC
[sweep]
name = slurm
command = sim
[fixed]
trace = $root/traces/synthetic-opt-8l-4s.trace
model = OPT-30B
hardware = H100-80GB
prompt-len = 128
gen-len = 512
[vary]
batch = 16 64
system = alisa flexgen vllm
SPEC
n=6

# as experiments/README.md: the jobs file, one array task per line
cd "$tmp" || exit 1
"$alisa" sweep s.sweep --emit-jobs --parts "$tmp/parts" >jobs.txt
[ "$(wc -l <jobs.txt)" -eq $n ]
check $? "one command per point"
cat >task.sh <<'TASK'
#!/usr/bin/env bash
# one array task: line SLURM_ARRAY_TASK_ID + 1 of the jobs file
eval "$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$1")"
TASK
out=$(sbatch --wait --array=0-$((n - 1)) --output="$tmp/task-%a.out" --chdir="$tmp" \
    --export=ALL task.sh "$tmp/jobs.txt" 2>&1)
check $? "the job array ran to the end: $out"
echo "slurm: $out"
[ "$(ls "$tmp"/parts/*.db 2>/dev/null | wc -l)" -eq $n ]
check $? "each task wrote its database ($(ls "$tmp"/parts 2>/dev/null | wc -l) of $n)"
"$alisa" db merge merged.db parts/*.db >merge.out 2>&1
check $? "db merge: $(cat merge.out)"
"$alisa" db export --db merged.db --query sim -o merged.csv
[ "$(tail -n +2 merged.csv | cut -d, -f2 | sort -u | wc -l)" -eq $n ] &&
    [ "$(tail -n +2 merged.csv | wc -l)" -eq $n ]
check $? "every point once in the merged database"

"$alisa" sweep s.sweep --db direct.db >/dev/null 2>&1
"$alisa" db export --db direct.db --query sim -o direct.csv
no_wall() { awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "wall_s") w = i }
                              { if (w) $w = ""; print }' "$1"; }
diff <(no_wall merged.csv) <(no_wall direct.csv) >/dev/null
check $? "Slurm array + merge gives the same rows as a local run"

echo "slurm: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
