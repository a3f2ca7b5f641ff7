#!/bin/sh
# The timings docs/BENCHMARKS.md gives for each CPU (a speed claim must hold on AMD EPYC and on
# Intel Xeon alike), run one after the other, each table saved as
# bench/results/KIND-CPU-YYYYmmdd-HHMMSS.md (CPU: model name, family, model and widest vector
# instructions, e.g. AMD-EPYC-f25m17-avx2):
#
#   server        every BF.* and LC.* row against RedisBloom 2.8.2 and the floors (bench/floor)
#   persistence   DUMP, RESTORE, BGSAVE, DEBUG RELOAD and full sync of a 0.001 / 200M filter,
#                 empty, with 2M items and full, against RedisBloom
#   lc-add-floor  LC.ADD by counter size against the module-API floor
#   creates       BF.MADD creating a default filter against RedisBloom, on fresh servers
#   lc-union      many-key LC.COUNT against PFCOUNT, on redis-server and on Valkey
#   cpu           the CPU's model, caches and the instructions the module's paths depend on
#
# About half an hour (19 minutes on AMD EPYC) and 3 GB of memory; run it on a quiet machine
# (`make bench-cpu` builds what it needs first). Each script's own knobs (BENCH_ROUNDS,
# PERSIST_FILLS, ADD_ROUNDS, UNION_SHAPES, ...) pass through, so a short trial run is
# `BENCH_ROUNDS=1 PERSIST_FILLS=0 ...`.
set -eu

# The model name alone ("AMD EPYC" in some VMs) does not tell CPUs apart whose paths differ:
# the family, the model and the widest vector instructions the module uses go in the name.
info() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'; }
flags=" $(info flags) "
case $flags in
    *" avx512_vbmi2 "*) widest=avx512-vbmi2 ;;
    *" avx512f "*) widest=avx512 ;;
    *" avx2 "*) widest=avx2 ;;
    *) widest=sse ;;
esac
cpu=$(printf '%s-f%sm%s-%s' "$(info 'model name')" "$(info 'cpu family')" "$(info model)" "$widest" |
    sed 's/[^A-Za-z0-9]\{1,\}/-/g; s/-$//')
stamp=$(date -u +%Y%m%d-%H%M%S)
py=${PY:-.venv/bin/python}
peer=$(realpath "$(scripts/fetch-tool.sh redisbloom)")
valkey=$(realpath "$(scripts/fetch-tool.sh valkey)")
export LCBLOOM_MODULE="$PWD/target/release/liblcbloom.so"
export FLOOR_MODULE="$PWD/target/floor/floor_module.so"
export DRAM_FLOOR="$PWD/target/floor/dram_floor"

# Runs the rest of the arguments, the table they print saved as KIND ($1).
saved() {
    kind=$1
    shift
    echo "== $kind ($cpu)"
    "$@" | tee "bench/results/$kind-$cpu-$stamp.md"
}

# What the figures depend on: the CPU's caches and the instructions the module picks its
# paths by (POPCNT, BMI, LZCNT as `abm`, AVX2, AVX-512 and its VBMI2).
{
    echo "# CPU ($cpu, $stamp)"
    echo
    lscpu | grep -E '^(Model name|CPU family|Model|CPU\(s\)|L1d|L2|L3)' | sed 's/^/    /'
    echo
    echo "Instructions:" $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -xE 'popcnt|bmi1|bmi2|abm|avx2|avx512f|avx512dq|avx512cd|avx512bw|avx512vl|avx512_vbmi2')
} | tee "bench/results/cpu-$cpu-$stamp.md"

PEER_MODULE=$peer BENCH_OUT="bench/results/server-$cpu-$stamp.md" "$py" bench/server_bench.py
saved persistence env PEER_MODULE="$peer" \
    PERSIST_FILLS="${PERSIST_FILLS:-0,2000000,199000000}" "$py" bench/persistence_bench.py
saved lc-add-floor env ADD_ROUNDS="${ADD_ROUNDS:-15}" "$py" bench/lc_add_floor_bench.py
saved creates "$py" bench/creates_ab.py "$peer" "$LCBLOOM_MODULE" "${BENCH_ROUNDS:-5}"
shapes=${UNION_SHAPES:-10000:100,10000:250,10000:100:2,10000:100:1:100,10000:2000,10000:3400,10000:5000,100000:100,100000:250,100000:100:2,100000:100:1:100,100000:2000,100000:3400,100000:5000}
bases=${UNION_BASES:-350}
saved lc-union env UNION_SHAPES="$shapes" UNION_BASES="$bases" "$py" bench/lc_union_bench.py
saved lc-union-valkey env UNION_SHAPES="$shapes" UNION_BASES="$bases" REDIS_SERVER="$valkey" \
    "$py" bench/lc_union_bench.py
