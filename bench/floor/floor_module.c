/*
 * The module-API floor: the least work a Redis module command can do for an LC.ADD or an
 * LC.COUNT, to measure lcbloom against (bench/server_bench.py; built by `make bench`).
 *
 *   FLOOR.ADD key item   open the key for writing (creating a 2 KB value if missing), check its
 *                        type, set one hashed bit, and if it was new: count it, replicate the
 *                        command verbatim, fire a keyspace event; reply 1 or 0.
 *   FLOOR.COUNT key      open the key for reading, check its type, reply the cached count.
 *   FLOOR.BITMAP key bytes   make FLOOR.ADD's value `bytes` long instead of 2 KB: the floor
 *                        of a counter of that size (bench/lc_add_floor_bench.py), whose keys
 *                        then stay in the caches as much as the counter's do.
 *
 * That is what LC.ADD and LC.COUNT do on a counter in bitmap mode, minus everything specific
 * to them (argument borrowing, XXH3, the estimate, the panic boundary), so no module command
 * doing their job can be faster on the same server. The hash is FNV-1a with a final mix:
 * cheap, and good enough to spread one bit over 16,384.
 *
 * The same floor for a cache-local ("blocked") Bloom filter much larger than the caches, where
 * every item costs one random 64-byte line:
 *
 *   FLOOR.RESERVE key bytes     a zeroed array of `bytes` (rounded down to whole lines)
 *   FLOOR.SET key item          set 8 hashed bits in one hashed line; if one was new, replicate
 *                               verbatim and fire a keyspace event; reply 1 or 0
 *   FLOOR.PROBE key item        reply whether the 8 bits are set
 *   FLOOR.MSET key item ...     FLOOR.SET of each item, an array reply, hashing all items first
 *   FLOOR.MPROBE key item ...   and prefetching the lines 16 items ahead (as lcbloom does)
 *
 * These are what BF.ADD/BF.EXISTS/BF.MADD/BF.MEXISTS cost at least on such a filter: the
 * module API's fixed cost, one DRAM line per item, and one reply element per item.
 *
 * The same floor for a single add or lookup in a standard-layout filter, whose k probes are
 * bits anywhere in the array:
 *
 *   FLOOR.RESERVE key bytes k   an array whose FLOOR.SET sets k bits at positions h1 + i·h2,
 *                               asking for all their lines before it touches any (as lcbloom's
 *                               single add does), and whose FLOOR.PROBE reads them in order and
 *                               stops at the first bit unset (what a non-member costs)
 *
 * The same floor for a counter that lists its items sorted (LC's exact and tokens modes), where
 * a new item is inserted in order and what follows it moves:
 *
 *   FLOOR.LIST key bytes    a sorted list of bytes/2 random 16-bit values (room for an eighth more)
 *   FLOOR.INSERT key item   ask for every line of the list, binary-search the item's 16-bit
 *                           hash; if it is new, move the values after it up by one (growing the
 *                           list by an eighth when full), count it, replicate verbatim, fire a
 *                           keyspace event; reply 1 or 0
 *
 * That is the least an insert into a sorted list of the same bytes costs: its search and the
 * move of the list's tail, half the list on average.
 *
 * Load argument `huge-pages`: arrays of 4 MiB and more are advised MADV_HUGEPAGE, as lcbloom's
 * are under `bf-huge-pages yes`, so that the two compare in the same pages.
 */
#include "redismodule.h"
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

static int huge_pages;

#define FLOOR_BYTES 2048

typedef struct {
    uint64_t count;
    uint64_t bytes;
    uint8_t bits[];
} FloorValue;

#define MAX_FLOOR_BYTES (1u << 30)

static FloorValue *floor_value(uint64_t bytes) {
    FloorValue *v = RedisModule_Calloc(1, sizeof *v + bytes);
    v->bytes = bytes;
    return v;
}

static RedisModuleType *FloorType;

static uint64_t floor_hash(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static int FloorAdd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    FloorValue *v;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        v = floor_value(FLOOR_BYTES);
        RedisModule_ModuleTypeSetValue(key, FloorType, v);
    } else if (RedisModule_ModuleTypeGetType(key) != FloorType) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    } else {
        v = RedisModule_ModuleTypeGetValue(key);
    }
    size_t len;
    const char *item = RedisModule_StringPtrLen(argv[2], &len);
    /* The hash's range reduced by a multiply, not a division (as lcbloom does). */
    uint64_t bit = (uint64_t)(((unsigned __int128)floor_hash(item, len) * (v->bytes * 8)) >> 64);
    uint8_t mask = (uint8_t)(1u << (bit & 7));
    int changed = !(v->bits[bit >> 3] & mask);
    if (changed) {
        v->bits[bit >> 3] |= mask;
        v->count++;
        RedisModule_ReplicateVerbatim(ctx);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.add", argv[1]);
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, changed);
}

static int FloorCount(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    long long count = 0;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        if (RedisModule_ModuleTypeGetType(key) != FloorType) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        }
        count = (long long)((FloorValue *)RedisModule_ModuleTypeGetValue(key))->count;
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, count);
}

/* For `CMD key bytes`, which makes a value: `bytes` (min..max) and the key, open for writing
 * and empty; NULL once an error is replied. */
static RedisModuleKey *open_new(RedisModuleCtx *ctx, RedisModuleString **argv, long long min,
                                long long max, long long *bytes) {
    if (RedisModule_StringToLongLong(argv[2], bytes) != REDISMODULE_OK || *bytes < min ||
        *bytes > max) {
        RedisModule_ReplyWithError(ctx, "ERR bad size");
        return NULL;
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        RedisModule_ReplyWithError(ctx, "ERR item exists");
        return NULL;
    }
    return key;
}

static int FloorBitmap(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long bytes;
    RedisModuleKey *key = open_new(ctx, argv, 1, MAX_FLOOR_BYTES, &bytes);
    if (key == NULL) return REDISMODULE_OK;
    RedisModule_ModuleTypeSetValue(key, FloorType, floor_value((uint64_t)bytes));
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static void *FloorLoad(RedisModuleIO *rdb, int encver) {
    (void)encver;
    size_t len;
    char *buf = RedisModule_LoadStringBuffer(rdb, &len);
    FloorValue *v = NULL;
    if (buf && len >= sizeof *v) {
        uint64_t bytes;
        memcpy(&bytes, buf + offsetof(FloorValue, bytes), sizeof bytes);
        if (bytes <= MAX_FLOOR_BYTES && len == sizeof *v + bytes) {
            v = floor_value(bytes);
            memcpy(v, buf, len);
        }
    }
    if (buf) RedisModule_Free(buf);
    return v;
}

static void FloorSave(RedisModuleIO *rdb, void *value) {
    const FloorValue *v = value;
    RedisModule_SaveStringBuffer(rdb, value, sizeof *v + v->bytes);
}

static void FloorFree(void *value) { RedisModule_Free(value); }

static size_t FloorMemUsage(const void *value) {
    const FloorValue *v = value;
    return sizeof *v + v->bytes;
}

/* ---- One random line per item over a large array ------------------------------------- */

#define LINE_WORDS 8
#define PREFETCH_AHEAD 16
#define MAX_BATCH 1000

#define MAX_PROBES 24

typedef struct {
    uint64_t lines;
    uint64_t *words;
    /* 0: 8 bits in one line per item; else this many bits anywhere in the array. */
    uint32_t probes;
} FloorLines;

static RedisModuleType *LinesType;

/* The line of an item and the 8 bit masks within its 8 words (one bit per word). */
static uint64_t line_of(const FloorLines *v, uint64_t h) { return (h >> 11) % v->lines; }

static int line_test_and_set(FloorLines *v, uint64_t h, int set) {
    uint64_t *w = v->words + line_of(v, h) * LINE_WORDS;
    int all = 1;
    for (int i = 0; i < LINE_WORDS; i++) {
        uint64_t mask = 1ULL << ((h >> (i * 6 % 58)) & 63);
        all &= (w[i] & mask) != 0;
        if (set) w[i] |= mask;
    }
    return all;
}

/* The standard layout's test-and-set: all lines asked for first when setting; a lookup stops
 * at its first bit unset. Double hashing over the whole array, ranges reduced by a multiply. */
static int probes_test_and_set(FloorLines *v, uint64_t h, int set) {
    uint64_t bits = v->lines * 512, h2 = (h * 0x9e3779b97f4a7c15ULL) | 1, at[MAX_PROBES];
    for (uint32_t i = 0; i < v->probes; i++) {
        at[i] = (uint64_t)(((unsigned __int128)(h + i * h2) * bits) >> 64);
        if (set) __builtin_prefetch(v->words + (at[i] >> 6), 1);
    }
    int all = 1;
    for (uint32_t i = 0; i < v->probes; i++) {
        uint64_t *w = v->words + (at[i] >> 6), mask = 1ULL << (at[i] & 63);
        if (!set && !(*w & mask)) return 0;
        all &= (*w & mask) != 0;
        *w |= set ? mask : 0;
    }
    return all;
}

static FloorLines *open_lines(RedisModuleCtx *ctx, RedisModuleKey *key, int *err) {
    *err = 0;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) return NULL;
    if (RedisModule_ModuleTypeGetType(key) != LinesType) {
        *err = 1;
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return NULL;
    }
    return RedisModule_ModuleTypeGetValue(key);
}

static int FloorReserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3 && argc != 4) return RedisModule_WrongArity(ctx);
    long long probes = 0;
    if (argc == 4 && (RedisModule_StringToLongLong(argv[3], &probes) != REDISMODULE_OK ||
                      probes < 1 || probes > MAX_PROBES))
        return RedisModule_ReplyWithError(ctx, "ERR bad probes");
    long long bytes;
    RedisModuleKey *key = open_new(ctx, argv, 64, LLONG_MAX, &bytes);
    if (key == NULL) return REDISMODULE_OK;
    FloorLines *v = RedisModule_Alloc(sizeof *v);
    v->lines = (uint64_t)bytes / 64;
    v->probes = (uint32_t)probes;
    /* Written once, so that no page faults in while timed (lcbloom's filters are warmed by
     * the benchmark with 1M items before they are timed). */
    v->words = RedisModule_Alloc(v->lines * 64);
    if (huge_pages && v->lines * 64 >= 2 * HUGE_PAGE) {
        /* The whole huge pages inside the array (the allocator aligns only to 4 KiB). */
        uintptr_t start = ((uintptr_t)v->words + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        uintptr_t end = ((uintptr_t)v->words + v->lines * 64) & ~(uintptr_t)(HUGE_PAGE - 1);
        madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
    memset(v->words, 0, v->lines * 64);
    RedisModule_ModuleTypeSetValue(key, LinesType, v);
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int lines_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int set, int multi) {
    if (multi ? argc < 3 : argc != 3) return RedisModule_WrongArity(ctx);
    int items = argc - 2;
    if (items > MAX_BATCH) return RedisModule_ReplyWithError(ctx, "ERR too many items");
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | (set ? REDISMODULE_WRITE : 0));
    int err;
    FloorLines *v = open_lines(ctx, key, &err);
    if (err) {
        RedisModule_CloseKey(key);
        return REDISMODULE_OK;
    }
    if (v == NULL || (multi && v->probes)) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, v ? "ERR batches take one-line arrays" : "ERR not found");
    }
    uint64_t hashes[MAX_BATCH];
    for (int i = 0; i < items; i++) {
        size_t len;
        const char *item = RedisModule_StringPtrLen(argv[2 + i], &len);
        hashes[i] = floor_hash(item, len);
        if (i < PREFETCH_AHEAD) __builtin_prefetch(v->words + line_of(v, hashes[i]) * LINE_WORDS);
    }
    if (multi) RedisModule_ReplyWithArray(ctx, items);
    int changed = 0;
    for (int i = 0; i < items; i++) {
        if (i + PREFETCH_AHEAD < items)
            __builtin_prefetch(v->words + line_of(v, hashes[i + PREFETCH_AHEAD]) * LINE_WORDS);
        int present = v->probes ? probes_test_and_set(v, hashes[i], set)
                                : line_test_and_set(v, hashes[i], set);
        changed |= set && !present;
        RedisModule_ReplyWithLongLong(ctx, set ? !present : present);
    }
    if (changed) {
        RedisModule_ReplicateVerbatim(ctx);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.set", argv[1]);
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

static int FloorSet(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return lines_command(ctx, argv, argc, 1, 0);
}
static int FloorProbe(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return lines_command(ctx, argv, argc, 0, 0);
}
static int FloorMSet(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return lines_command(ctx, argv, argc, 1, 1);
}
static int FloorMProbe(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return lines_command(ctx, argv, argc, 0, 1);
}

/* The benchmark never saves: line arrays and sorted lists are not persisted (nothing loads
 * back). */
static void *UnsavedLoad(RedisModuleIO *rdb, int encver) {
    (void)rdb;
    (void)encver;
    return NULL;
}
static void UnsavedSave(RedisModuleIO *rdb, void *value) {
    (void)rdb;
    (void)value;
}
static void LinesFree(void *value) {
    FloorLines *v = value;
    RedisModule_Free(v->words);
    RedisModule_Free(v);
}
static size_t LinesMemUsage(const void *value) {
    const FloorLines *v = value;
    return sizeof *v + v->lines * 64;
}

/* ---- A sorted list, one insert at a time ---------------------------------------------- */

typedef struct {
    uint64_t n, cap;
    uint16_t *values;
} FloorList;

static RedisModuleType *ListType;

static int FloorListCreate(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long bytes;
    RedisModuleKey *key = open_new(ctx, argv, 2, 1LL << 30, &bytes);
    if (key == NULL) return REDISMODULE_OK;
    size_t len;
    const char *name = RedisModule_StringPtrLen(argv[1], &len);
    uint64_t x = floor_hash(name, len) | 1;
    FloorList *v = RedisModule_Alloc(sizeof *v);
    /* Room for an eighth more, as after a growth: inserts do not all grow their lists at once. */
    v->n = (uint64_t)bytes / 2;
    v->cap = v->n + v->n / 8 + 8;
    v->values = RedisModule_Alloc(v->cap * sizeof *v->values);
    /* n sorted random values: the gaps of a uniform draw, one pass. */
    uint64_t value = 0;
    for (uint64_t i = 0; i < v->n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        value += x % (2 * 65536 / v->n + 1);
        v->values[i] = value > 65535 ? 65535 : (uint16_t)value;
    }
    RedisModule_ModuleTypeSetValue(key, ListType, v);
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int FloorInsert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, "ERR not found");
    }
    if (RedisModule_ModuleTypeGetType(key) != ListType) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    FloorList *v = RedisModule_ModuleTypeGetValue(key);
    for (uint64_t b = 0; b < v->n * sizeof *v->values; b += 64)
        __builtin_prefetch((const char *)v->values + b, 1);
    size_t len;
    const char *item = RedisModule_StringPtrLen(argv[2], &len);
    uint16_t h = (uint16_t)(floor_hash(item, len) >> 48);
    uint64_t lo = 0, hi = v->n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (v->values[mid] < h) lo = mid + 1;
        else hi = mid;
    }
    int changed = lo == v->n || v->values[lo] != h;
    if (changed) {
        if (v->n == v->cap) {
            v->cap += v->cap / 8 + 8;
            v->values = RedisModule_Realloc(v->values, v->cap * sizeof *v->values);
        }
        memmove(v->values + lo + 1, v->values + lo, (v->n - lo) * sizeof *v->values);
        v->values[lo] = h;
        v->n++;
        RedisModule_ReplicateVerbatim(ctx);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.insert", argv[1]);
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, changed);
}

static void ListFree(void *value) {
    FloorList *v = value;
    RedisModule_Free(v->values);
    RedisModule_Free(v);
}
static size_t ListMemUsage(const void *value) {
    const FloorList *v = value;
    return sizeof *v + v->cap * sizeof *v->values;
}

static RedisModuleType *create_type(RedisModuleCtx *ctx, const char *name,
                                    RedisModuleTypeLoadFunc load, RedisModuleTypeSaveFunc save,
                                    RedisModuleTypeFreeFunc free_value,
                                    RedisModuleTypeMemUsageFunc mem_usage) {
    RedisModuleTypeMethods methods = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = load,
        .rdb_save = save,
        .free = free_value,
        .mem_usage = mem_usage,
    };
    return RedisModule_CreateDataType(ctx, name, 0, &methods);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    for (int i = 0; i < argc; i++) {
        size_t len;
        const char *arg = RedisModule_StringPtrLen(argv[i], &len);
        if (len == 10 && strncasecmp(arg, "huge-pages", len) == 0) huge_pages = 1;
        else return REDISMODULE_ERR;
    }
    FloorType = create_type(ctx, "floorbits", FloorLoad, FloorSave, FloorFree, FloorMemUsage);
    LinesType = create_type(ctx, "floorline", UnsavedLoad, UnsavedSave, LinesFree, LinesMemUsage);
    ListType = create_type(ctx, "floorlist", UnsavedLoad, UnsavedSave, ListFree, ListMemUsage);
    if (FloorType == NULL || LinesType == NULL || ListType == NULL) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.add", FloorAdd, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.count", FloorCount, "readonly", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.bitmap", FloorBitmap, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.reserve", FloorReserve, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.set", FloorSet, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.probe", FloorProbe, "readonly", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.mset", FloorMSet, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.mprobe", FloorMProbe, "readonly", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.list", FloorListCreate, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.insert", FloorInsert, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
