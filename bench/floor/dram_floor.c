/*
 * The DRAM floor of a Bloom filter batch: what the memory system allows for `reads` random
 * 64-byte reads per item over an array of the filter's size, in batches of `batch` items
 * (a BF.MADD/MEXISTS of that many), with every item's lines computed before the batch starts
 * and prefetched `d` items ahead, for d in 0 (none) .. the whole batch. Built and run by
 * `make bench` (bench/server_bench.py compares lcbloom's batches with it).
 *
 * Usage: dram_floor <array bytes> <reads per item> [batch] [items]
 * Prints one line per prefetch distance, then "best <ns/item> at d=<d>".
 *
 * Like redis-server here (disable-thp yes), transparent huge pages are refused, so TLB misses
 * count as they do for the module; with DRAM_FLOOR_HUGE_PAGES=1 in the environment the array
 * is advised as huge-page memory instead, as lcbloom's bit arrays are under `bf-huge-pages
 * yes`. The array is written once first so that no page fault is timed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <array bytes> <reads per item> [batch] [items]\n", argv[0]);
        return 2;
    }
    size_t bytes = strtoull(argv[1], NULL, 10);
    int reads = atoi(argv[2]);
    int batch = argc > 3 ? atoi(argv[3]) : 100;
    long items = argc > 4 ? atol(argv[4]) : 2000000;
    size_t lines = bytes / 64;
    if (lines == 0 || reads < 1 || batch < 1 || items < batch) return 2;
    const char *huge = getenv("DRAM_FLOOR_HUGE_PAGES");
    int huge_pages = huge && strcmp(huge, "1") == 0;
    if (!huge_pages) prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    /* Whole 2 MiB pages, so that huge pages can back all of it when asked for. */
    size_t rounded = (lines * 64 + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    uint64_t *array = aligned_alloc(2u << 20, rounded);
    size_t *index = malloc(sizeof(size_t) * batch * reads);
    if (!array || !index) return 1;
    if (huge_pages) madvise(array, rounded, MADV_HUGEPAGE);
    memset(array, 1, lines * 64);
    int distances[] = {0, 1, 2, 4, 8, 12, 16, 24, 32, 64, 100};
    double best = 1e30;
    int best_d = 0;
    uint64_t sink = 0, counter = 0;
    for (size_t di = 0; di < sizeof distances / sizeof *distances; di++) {
        int d = distances[di];
        if (d > batch) continue;
        long batches = items / batch;
        double start = now();
        for (long b = 0; b < batches; b++) {
            /* Hash ahead: every line of the batch, as (x * lines) >> 64 like lcbloom's reduce. */
            for (int j = 0; j < batch * reads; j++)
                index[j] = (size_t)(((unsigned __int128)splitmix(counter++) * lines) >> 64) * 8;
            for (int i = 0; i < d && i < batch; i++)
                for (int r = 0; r < reads; r++) _mm_prefetch((char *)&array[index[i * reads + r]], _MM_HINT_T0);
            for (int i = 0; i < batch; i++) {
                if (d && i + d < batch)
                    for (int r = 0; r < reads; r++)
                        _mm_prefetch((char *)&array[index[(i + d) * reads + r]], _MM_HINT_T0);
                for (int r = 0; r < reads; r++) sink += array[index[i * reads + r]];
            }
        }
        double ns = (now() - start) * 1e9 / (batches * batch);
        printf("d=%d %.1f ns/item\n", d, ns);
        if (ns < best) {
            best = ns;
            best_d = d;
        }
    }
    printf("best %.1f ns/item at d=%d (%zu bytes, %d reads/item, batches of %d; sink %llu)\n", best,
           best_d, lines * 64, reads, batch, (unsigned long long)(sink & 1));
    return 0;
}
