/* The least a module command can spend on an admission through the module
 * API: FLOOR.ADMIT key [arg ...] (the arguments after the key are read by
 * Redis and ignored, so that a row can send as many as the command it is
 * set beside) writes a 16-byte value with an expiry the way the
 * module's decision commands do (open the key, read it, set the value,
 * set the expiry, signal it), replicates the effect as SET key value PXAT
 * ms, and replies with five integers. No parsing and no decision: what is
 * left is what the API itself costs. Built and loaded by
 * scripts/admission_parts.sh (against the redismodule.h of the
 * redis-module crate) beside the module, never shipped. */
#define REDISMODULE_MAIN
#include "redismodule.h"
#include <string.h>

static RedisModuleString *pxat;

static int admit(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, "WRONGTYPE");
    }
    char value[16];
    memset(value, 'v', sizeof value);
    RedisModuleString *v = NULL;
    size_t len = 0;
    char *dma = type == REDISMODULE_KEYTYPE_STRING
                    ? RedisModule_StringDMA(key, &len, REDISMODULE_WRITE)
                    : NULL;
    if (dma != NULL && len == sizeof value) {
        memcpy(dma, value, sizeof value);
        v = RedisModule_CreateString(NULL, value, sizeof value);
    } else {
        v = RedisModule_CreateString(NULL, value, sizeof value);
        RedisModule_StringSet(key, v);
    }
    long long at = RedisModule_Milliseconds() + 3600000;
    RedisModule_SetAbsExpire(key, at);
    char digits[24];
    int n = 0;
    for (long long rest = at; rest > 0; rest /= 10) digits[23 - n++] = (char)('0' + rest % 10);
    RedisModule_Replicate(ctx, "SET", "sssb", argv[1], v, pxat, digits + 24 - n, (size_t)n);
    RedisModule_SignalModifiedKey(ctx, argv[1]);
    RedisModule_FreeString(NULL, v);
    RedisModule_CloseKey(key);
    int resp3 = RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3;
    (void)resp3;
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, 10);
    RedisModule_ReplyWithLongLong(ctx, 9);
    RedisModule_ReplyWithLongLong(ctx, -1);
    RedisModule_ReplyWithLongLong(ctx, 360000);
    return REDISMODULE_OK;
}

/* FLOOR.TRUNCATE: FLOOR.ADMIT creating a new key by resizing it
 * (RM_StringTruncate) and writing its bytes in place (RM_StringDMA), where
 * FLOOR.ADMIT sets a string (RM_StringSet); the value then goes to
 * RM_Replicate as bytes. The same effects: whether this path is cheaper. */
static int admit_truncate(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, "WRONGTYPE");
    }
    char value[16];
    memset(value, 'v', sizeof value);
    size_t len = type == REDISMODULE_KEYTYPE_STRING ? RedisModule_ValueLength(key) : 0;
    if (len != sizeof value) RedisModule_StringTruncate(key, sizeof value);
    char *dma = RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
    if (dma != NULL && len == sizeof value) memcpy(dma, value, sizeof value);
    long long at = RedisModule_Milliseconds() + 3600000;
    RedisModule_SetAbsExpire(key, at);
    char digits[24];
    int n = 0;
    for (long long rest = at; rest > 0; rest /= 10) digits[23 - n++] = (char)('0' + rest % 10);
    RedisModule_Replicate(ctx, "SET", "sbsb", argv[1], value, sizeof value, pxat, digits + 24 - n,
                          (size_t)n);
    RedisModule_SignalModifiedKey(ctx, argv[1]);
    RedisModule_CloseKey(key);
    int resp3 = RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3;
    (void)resp3;
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, 10);
    RedisModule_ReplyWithLongLong(ctx, 9);
    RedisModule_ReplyWithLongLong(ctx, -1);
    RedisModule_ReplyWithLongLong(ctx, 360000);
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    pxat = RedisModule_CreateString(NULL, "PXAT", 4);
    if (RedisModule_CreateCommand(ctx, "floor.admit", admit, "write deny-oom", 1, 1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "floor.truncate", admit_truncate, "write deny-oom", 1, 1, 1);
}
