/*
 * The module-API floor: the least work a Redis module command can do for an LC.ADD or an
 * LC.COUNT, to measure lcbloom against (bench/server_bench.py; built by `make bench`).
 *
 *   FLOOR.ADD key item   open the key for writing (creating a 2 KB value if missing), check its
 *                        type, set one hashed bit, and if it was new: count it, replicate the
 *                        command verbatim, fire a keyspace event; reply 1 or 0.
 *   FLOOR.COUNT key      open the key for reading, check its type, reply the cached count.
 *
 * That is what LC.ADD and LC.COUNT do on a counter in bitmap mode, minus everything specific
 * to them (argument borrowing, XXH3, the estimate, the panic boundary), so no module command
 * doing their job can be faster on the same server. The hash is FNV-1a with a final mix:
 * cheap, and good enough to spread one bit over 16,384.
 */
#include "redismodule.h"
#include <stdint.h>
#include <string.h>

#define FLOOR_BYTES 2048

typedef struct {
    uint64_t count;
    uint8_t bits[FLOOR_BYTES];
} FloorValue;

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
        v = RedisModule_Calloc(1, sizeof *v);
        RedisModule_ModuleTypeSetValue(key, FloorType, v);
    } else if (RedisModule_ModuleTypeGetType(key) != FloorType) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    } else {
        v = RedisModule_ModuleTypeGetValue(key);
    }
    size_t len;
    const char *item = RedisModule_StringPtrLen(argv[2], &len);
    uint64_t bit = floor_hash(item, len) % (FLOOR_BYTES * 8);
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

static void *FloorLoad(RedisModuleIO *rdb, int encver) {
    (void)encver;
    size_t len;
    char *buf = RedisModule_LoadStringBuffer(rdb, &len);
    if (!buf || len != sizeof(FloorValue)) {
        if (buf) RedisModule_Free(buf);
        return NULL;
    }
    FloorValue *v = RedisModule_Alloc(sizeof *v);
    memcpy(v, buf, sizeof *v);
    RedisModule_Free(buf);
    return v;
}

static void FloorSave(RedisModuleIO *rdb, void *value) {
    RedisModule_SaveStringBuffer(rdb, value, sizeof(FloorValue));
}

static void FloorFree(void *value) { RedisModule_Free(value); }

static size_t FloorMemUsage(const void *value) {
    (void)value;
    return sizeof(FloorValue);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = FloorLoad,
        .rdb_save = FloorSave,
        .free = FloorFree,
        .mem_usage = FloorMemUsage,
    };
    FloorType = RedisModule_CreateDataType(ctx, "floorbits", 0, &tm);
    if (FloorType == NULL) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.add", FloorAdd, "write deny-oom", 1, 1, 1) ==
            REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.count", FloorCount, "readonly", 1, 1, 1) ==
            REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
