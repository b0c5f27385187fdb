/* Loaded into every measured server (LD_PRELOAD, redline/server/seed.py): every read of
 * /dev/urandom through stdio gets the same bytes, so the server's random hash seed — drawn from
 * /dev/urandom at startup by Redis, Valkey and KeyDB (getRandomBytes) — is the same in every
 * instance, and so is the layout of its dictionaries (the command table, the keyspace).
 * Without it a server draws a new seed at each start, and about one instance in eight finds
 * another command ahead of GET in its bucket of the command table: one more string compare per
 * lookup, +67 instructions per GET outside call() (docs/measure-instructions.md).
 * Every other file opens as usual.
 *
 * srand() and srandom() get a fixed seed too: Redis seeds them from the time and its pid at
 * startup, and a sorted set's skiplist draws each node's level from random(), so without this
 * two servers restored from one RDB file build differently shaped skiplists and count ZRANK,
 * ZCOUNT and their kind differently (docs/measure-instructions.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_BYTES 4096
#define DEVICE "/dev/urandom"

static unsigned char fixed_bytes[SEED_BYTES];

static FILE *fixed_stream(void) {
    for (size_t i = 0; i < SEED_BYTES; i++)
        fixed_bytes[i] = (unsigned char)(i * 131u + 17u);
    return fmemopen(fixed_bytes, SEED_BYTES, "r");
}

typedef FILE *(*open_function)(const char *, const char *);

/* DEVICE gets the fixed bytes; any other path goes to the next definition of `name` (libc's). */
static FILE *opened(const char *path, const char *mode, const char *name, open_function *next) {
    if (path != NULL && strcmp(path, DEVICE) == 0)
        return fixed_stream();
    if (*next == NULL)
        *next = (open_function)dlsym(RTLD_NEXT, name);
    return (*next)(path, mode);
}

FILE *fopen(const char *path, const char *mode) {
    static open_function next_fopen;
    return opened(path, mode, "fopen", &next_fopen);
}

FILE *fopen64(const char *path, const char *mode) {
    static open_function next_fopen64;
    return opened(path, mode, "fopen64", &next_fopen64);
}

#define FIXED_SEED 1u

typedef void (*seed_function)(unsigned int);

static void seeded(const char *name, seed_function *next) {
    if (*next == NULL)
        *next = (seed_function)dlsym(RTLD_NEXT, name);
    (*next)(FIXED_SEED);
}

void srand(unsigned int seed) {
    static seed_function next_srand;
    (void)seed;
    seeded("srand", &next_srand);
}

void srandom(unsigned int seed) {
    static seed_function next_srandom;
    (void)seed;
    seeded("srandom", &next_srandom);
}
