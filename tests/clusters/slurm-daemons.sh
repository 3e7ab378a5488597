# The SLURM test cluster's daemons, in start order, and the binary each runs as
# (sourced by slurm-up.sh and slurm-down.sh).
# shellcheck disable=SC2034  # used by the scripts that source this file
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd sshd)
declare -A EXE=(
    [munged]=/usr/sbin/munged
    [mariadbd]=/usr/sbin/mariadbd
    [slurmdbd]=/usr/sbin/slurmdbd
    [slurmctld]=/usr/sbin/slurmctld
    [slurmd]=/usr/sbin/slurmd
    [sshd]=/usr/sbin/sshd
)
