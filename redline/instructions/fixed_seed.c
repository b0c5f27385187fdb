/* Loaded into a counted server (LD_PRELOAD, redline/instructions/seed.py): every read of
 * /dev/urandom through stdio gets the same bytes, so the server's random hash seed — drawn from
 * /dev/urandom at startup by Redis, Valkey and KeyDB (getRandomBytes) — is the same in every
 * instance, and so is the layout of its dictionaries (the command table, the keyspace).
 * Without it a server draws a new seed at each start, and about one instance in eight finds
 * another command ahead of GET in its bucket of the command table: one more string compare per
 * lookup, +67 instructions per GET outside call() (docs/measure-instructions.md).
 * Every other file opens as usual. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define SEED_BYTES 4096
#define DEVICE "/dev/urandom"

static unsigned char fixed_bytes[SEED_BYTES];

static FILE *fixed_stream(void) {
    for (size_t i = 0; i < SEED_BYTES; i++)
        fixed_bytes[i] = (unsigned char)(i * 131u + 17u);
    return fmemopen(fixed_bytes, SEED_BYTES, "r");
}

FILE *fopen(const char *path, const char *mode) {
    static FILE *(*next_fopen)(const char *, const char *);
    if (path != NULL && strcmp(path, DEVICE) == 0)
        return fixed_stream();
    if (next_fopen == NULL)
        next_fopen = (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen");
    return next_fopen(path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
    static FILE *(*next_fopen64)(const char *, const char *);
    if (path != NULL && strcmp(path, DEVICE) == 0)
        return fixed_stream();
    if (next_fopen64 == NULL)
        next_fopen64 = (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen64");
    return next_fopen64(path, mode);
}
