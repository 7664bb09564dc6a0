/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the list of live objects and serex_dump: the walk with a
 * cursor and pins (the essay is in registry_internal.h), the per-object
 * buffer the describes write JSON into, and the writing of that buffer to
 * the caller's FILE with no lock held.
 *
 * The buffer starts on the dumper's stack (DUMP_INLINE bytes) and grows on
 * the heap; it holds one object at a time, so a dump's memory is that of
 * its largest object. A describe that runs out of memory is rolled back
 * and its object written as kind, address and "error", which always fits
 * the inline part: the document stays whole.
 *
 * With SEREX_DUMP_SYMBOLS, serex__dump_fn leaves a mark in the buffer
 * where a symbol goes: a NUL byte (never part of our JSON, whose strings
 * escape control characters) and the function pointer's bytes. The writer
 * looks each one up when it copies the buffer out, after the describe and
 * its locks are done: dladdr takes the dynamic loader's lock, which must
 * never be taken under an object's lock.
 */
#include <inttypes.h> /* PRIu64, PRId64, PRIxPTR */
#include <stdio.h>    /* FILE, fwrite, snprintf */
#include <string.h>   /* memcpy, memchr, strlen */

#include "registry_internal.h"

#include "alloc_internal.h"
#include "common_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

/* --- the registry --- */

/*
 * All under mu; head is the sentinel of the circular list. mu is a
 * spinlock: it is only ever held for a few pointer moves, cannot fail to
 * be made, and is held across fork() (fork.c) beside the parking lot's
 * 64 mutexes without making a 65th (ThreadSanitizer's deadlock detector
 * holds at most 64 per thread). A remover waiting for a dump to unpin its
 * node yields between looks: a describe takes microseconds.
 */
static struct {
    serex__spinlock mu;
    struct serex__reg head;
    size_t count; /* real nodes linked (not cursors) */
} registry = {
    0, {&registry.head, &registry.head, NULL, NULL, NULL, 0, false}, 0};

#define reg_lock() serex__spin_lock(&registry.mu)
#define reg_unlock() serex__spin_unlock(&registry.mu)

/* Under mu: links @r in after @at. */
static void reg_link_after(struct serex__reg *r, struct serex__reg *at)
{
    r->prev = at;
    r->next = at->next;
    at->next->prev = r;
    at->next = r;
}

/* Under mu. */
static void reg_unlink(struct serex__reg *r)
{
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

void serex__reg_add(struct serex__reg *r, const struct serex__reg_class *cls,
                    const void *obj, const char *name)
{
    SEREX_ASSERT(cls != NULL && cls->kind != NULL && r->next == NULL);
    r->cls = cls, r->obj = obj, r->name = name;
    r->pins = 0;
    r->leaving = false;
    reg_lock();
    reg_link_after(r, registry.head.prev); /* at the end: dumps list by age */
    registry.count++;
    reg_unlock();
}

void serex__reg_remove(struct serex__reg *r)
{
    reg_lock();
    if (r->next != NULL) {
        /* no dump pins it from now on; wait for those that have */
        r->leaving = true;
        while (r->pins != 0) {
            reg_unlock();
            serex__thread_yield();
            reg_lock();
        }
        reg_unlink(r);
        registry.count--;
    }
    reg_unlock();
}

size_t serex__reg_count(void)
{
    size_t n;

    reg_lock();
    n = registry.count;
    reg_unlock();
    return n;
}

/* --- fork: the lock across it; the parent's dumps left behind --- */

void serex__reg_fork_lock(void)
{
    reg_lock();
}

void serex__reg_fork_unlock(void)
{
    reg_unlock();
}

void serex__reg_fork_child(void)
{
    /* The child has one thread: the dumps that pinned nodes or left
     * cursors were others', and will never finish. The lock was taken
     * for the fork and is ours: unlocked here. */
    for (struct serex__reg *r = registry.head.next, *next; r != &registry.head;
         r = next) {
        next = r->next;
        r->pins = 0;
        if (r->cls == NULL)
            reg_unlink(r);
    }
    reg_unlock();
}

/* --- the dump's buffer --- */

#define DUMP_INLINE 4096 /* bytes on the dumper's stack */

struct serex__dump {
    char *buf; /* inline, or the heap once grown */
    size_t len, cap;
    bool oom;       /* this object's describe ran out: roll it back */
    bool symbols;   /* SEREX_DUMP_SYMBOLS: leave marks for serex__dump_fn */
    unsigned depth; /* containers open below the object's own level */
    unsigned skip;  /* containers open beyond SEREX__DUMP_DEPTH: dropped */
    /* bit i: the container at depth i has an item already (comma next);
     * is an array (items take no key). Depth 0 is the object itself. */
    uint32_t has_items, is_array;
    int64_t now; /* serex__dump_now */
    char inline_buf[DUMP_INLINE];
};

/* Out of memory: the rest of this object's writes are dropped. */
static bool dump_fail(struct serex__dump *d)
{
    d->oom = true;
    return false;
}

/* Room for @n more bytes; false (and oom set) when it cannot be had. */
static bool dump_reserve(struct serex__dump *d, size_t n)
{
    size_t cap = d->cap;
    char *p;

    if (d->oom)
        return false;
    if (n <= cap - d->len)
        return true;
    while (n > cap - d->len) {
        if (cap > SIZE_MAX / 2)
            return dump_fail(d);
        cap *= 2;
    }
    if ((p = serex__alloc(cap)) == NULL)
        return dump_fail(d);
    memcpy(p, d->buf, d->len);
    if (d->buf != d->inline_buf)
        serex__free(d->buf);
    d->buf = p;
    d->cap = cap;
    return true;
}

static void dump_put(struct serex__dump *d, const char *s, size_t n)
{
    if (dump_reserve(d, n)) {
        memcpy(d->buf + d->len, s, n);
        d->len += n;
    }
}

static void dump_puts(struct serex__dump *d, const char *s)
{
    dump_put(d, s, strlen(s));
}

/* --- strings: JSON escapes, and UTF-8 checked --- */

/*
 * The length of the well-formed UTF-8 sequence at @s (1 to 4), or 0 if
 * the bytes there are not one (a stray continuation byte, a truncated or
 * overlong sequence, a surrogate, or above U+10FFFF). @s is NUL-ended, so
 * a truncated sequence stops at the NUL, which is no continuation byte.
 */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t n;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    /* the second byte's range rules out overlongs, surrogates, > 10FFFF */
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* The escape for ASCII byte @c, or NULL if it stands for itself. */
static const char *json_escape(unsigned char c, char tmp[8])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
    }
    if (c >= 0x20)
        return NULL;
    snprintf(tmp, 8, "\\u%04x", c);
    return tmp;
}

/* @s as a JSON string, quotes included; NULL as null. */
static void dump_string(struct serex__dump *d, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    char tmp[8];

    if (s == NULL) {
        dump_puts(d, "null");
        return;
    }
    dump_put(d, "\"", 1);
    while (*p != '\0') {
        size_t n = utf8_len(p);
        const char *esc = n == 1 ? json_escape(*p, tmp) : NULL;

        if (n == 0) /* not UTF-8: say so, and resync at the next byte */
            dump_puts(d, "\\ufffd"), n = 1;
        else if (esc != NULL)
            dump_puts(d, esc);
        else
            dump_put(d, (const char *)p, n);
        p += n;
    }
    dump_put(d, "\"", 1);
}

/* --- the writers describe calls --- */

/*
 * Starts an item in the current container: the comma, then "key": in an
 * object. False when the item must be left out (too deep).
 */
static bool dump_item(struct serex__dump *d, const char *key)
{
    uint32_t bit = UINT32_C(1) << d->depth;

    if (d->skip != 0)
        return false;
    if (d->has_items & bit)
        dump_put(d, ",", 1);
    d->has_items |= bit;
    if (d->is_array & bit) {
        SEREX_ASSERT(key == NULL); /* an array's items have no key */
        return true;
    }
    SEREX_ASSERT(key != NULL);
    dump_string(d, key != NULL ? key : "");
    dump_put(d, ":", 1);
    return true;
}

/* An item whose value is @text as it is (a number, true, false). */
static void dump_raw(struct serex__dump *d, const char *key, const char *text)
{
    if (dump_item(d, key))
        dump_puts(d, text);
}

void serex__dump_u64(struct serex__dump *d, const char *key, uint64_t v)
{
    char num[24];

    snprintf(num, sizeof num, "%" PRIu64, v);
    dump_raw(d, key, num);
}

void serex__dump_i64(struct serex__dump *d, const char *key, int64_t v)
{
    char num[24];

    snprintf(num, sizeof num, "%" PRId64, v);
    dump_raw(d, key, num);
}

void serex__dump_bool(struct serex__dump *d, const char *key, bool v)
{
    dump_raw(d, key, v ? "true" : "false");
}

void serex__dump_str(struct serex__dump *d, const char *key, const char *v)
{
    if (dump_item(d, key))
        dump_string(d, v);
}

/* "0x..." of an address, quotes included. */
static void dump_address(struct serex__dump *d, uintptr_t a)
{
    char text[2 + 2 + 2 * sizeof a + 1];

    snprintf(text, sizeof text, "\"0x%" PRIxPTR "\"", a);
    dump_puts(d, text);
}

void serex__dump_ptr(struct serex__dump *d, const char *key, const void *p)
{
    if (!dump_item(d, key))
        return;
    if (p == NULL)
        dump_puts(d, "null");
    else
        dump_address(d, (uintptr_t)p);
}

void serex__dump_fn(struct serex__dump *d, const char *key, serex_fn fn)
{
    if (!dump_item(d, key))
        return;
    if (fn == NULL) {
        dump_puts(d, "null");
        return;
    }
    dump_puts(d, "{\"address\":");
    /* a function pointer converts to an integer (C11 6.3.2.3p6) */
    dump_address(d, (uintptr_t)fn);
    if (d->symbols) { /* the mark dump_write_out replaces */
        dump_put(d, "", 1);
        dump_put(d, (const char *)&fn, sizeof fn);
    }
    dump_put(d, "}", 1);
}

/* Opens a container; @array: an array, else an object. */
static void dump_open(struct serex__dump *d, const char *key, bool array)
{
    uint32_t bit;

    if (d->depth >= SEREX__DUMP_DEPTH || !dump_item(d, key)) {
        d->skip++;
        return;
    }
    bit = UINT32_C(1) << ++d->depth;
    d->has_items &= ~bit;
    d->is_array = array ? d->is_array | bit : d->is_array & ~bit;
    dump_put(d, array ? "[" : "{", 1);
}

static void dump_close(struct serex__dump *d, bool array)
{
    if (d->skip != 0) {
        d->skip--;
        return;
    }
    /* the kind of end must match its begin: checked in Debug only, as
     * the text comes from what was opened, whatever the end says */
    (void)array;
    SEREX_ASSERT(d->depth > 0);
    SEREX_ASSERT(((d->is_array >> d->depth) & 1) == (uint32_t)array);
    if (d->depth == 0)
        return; /* an end without its begin: the object stays open */
    dump_put(d, (d->is_array >> d->depth) & 1 ? "]" : "}", 1);
    d->depth--;
}

void serex__dump_array_begin(struct serex__dump *d, const char *key)
{
    dump_open(d, key, true);
}

void serex__dump_array_end(struct serex__dump *d)
{
    dump_close(d, true);
}

void serex__dump_object_begin(struct serex__dump *d, const char *key)
{
    dump_open(d, key, false);
}

void serex__dump_object_end(struct serex__dump *d)
{
    dump_close(d, false);
}

int64_t serex__dump_now(const struct serex__dump *d)
{
    return d->now;
}

/* --- one object --- */

/* The object's opening fields; the buffer is empty, the object open. */
static void dump_begin_object(struct serex__dump *d, const struct serex__reg *r)
{
    d->len = 0;
    d->oom = false;
    d->depth = d->skip = 0;
    d->has_items = d->is_array = 0;
    dump_puts(d, "{");
    serex__dump_str(d, "kind", r->cls->kind);
    serex__dump_ptr(d, "address", r->obj);
}

/* Closes what the describe left open (it should leave nothing), then
 * the object itself. */
static void dump_end_object(struct serex__dump *d)
{
    SEREX_ASSERT(d->depth == 0 && d->skip == 0);
    d->skip = 0;
    while (d->depth > 0)
        dump_close(d, (d->is_array >> d->depth) & 1);
    dump_put(d, "}", 1);
}

/* Under a pin, without the lock: @r's fields into the buffer. */
static void dump_describe(struct serex__dump *d, struct serex__reg *r)
{
    dump_begin_object(d, r);
    serex__dump_str(d, "name", r->name);
    d->now = serex__now_ns();
    if (r->cls->describe != NULL)
        r->cls->describe(r, d);
    dump_end_object(d);
    if (d->oom) {
        /* the inline part always holds this much: kind is a literal */
        dump_begin_object(d, r);
        serex__dump_str(d, "error", "out of memory");
        dump_end_object(d);
        SEREX_ASSERT(!d->oom);
        d->oom = true; /* for serex_dump's status */
    }
}

/* --- writing out --- */

static bool dump_fwrite(FILE *out, const char *s, size_t n)
{
    return n == 0 || fwrite(s, 1, n, out) == n;
}

/* The mark's function, named; its text goes where the mark was. */
static bool dump_symbol(struct serex__dump *d, FILE *out, serex_fn fn)
{
    char name[256];
    size_t len = d->len;
    bool ok;

    if (!serex__fn_symbol(fn, name, sizeof name))
        return true;
    /* escaped at the buffer's end (free again now), then written */
    dump_puts(d, ",\"symbol\":");
    dump_string(d, name);
    ok = d->oom || dump_fwrite(out, d->buf + len, d->len - len);
    d->len = len;
    d->oom = false;
    return ok;
}

/* The buffer to @out, marks replaced by symbols. */
static bool dump_write_out(struct serex__dump *d, FILE *out)
{
    const size_t end = d->len;
    size_t at = 0;

    while (at < end) {
        const char *mark = memchr(d->buf + at, '\0', end - at);
        size_t upto = mark != NULL ? (size_t)(mark - d->buf) : end;
        serex_fn fn;

        if (!dump_fwrite(out, d->buf + at, upto - at))
            return false;
        if (mark == NULL)
            break;
        memcpy(&fn, mark + 1, sizeof fn);
        at = upto + 1 + sizeof fn;
        if (!dump_symbol(d, out, fn)) /* borrows the room after `end` */
            return false;
    }
    return true;
}

/* --- the walk --- */

/* Under mu: the first real node after @c that is not leaving, or the
 * head. */
static struct serex__reg *reg_next_live(struct serex__reg *c)
{
    struct serex__reg *r = c->next;

    while (r != &registry.head && (r->cls == NULL || r->leaving))
        r = r->next;
    return r;
}

/* Under mu: the next object after the cursor, pinned, with the cursor
 * moved past it; NULL at the end. */
static struct serex__reg *reg_step(struct serex__reg *cursor)
{
    struct serex__reg *r = reg_next_live(cursor);

    if (r == &registry.head)
        return NULL;
    reg_unlink(cursor);
    reg_link_after(cursor, r);
    r->pins++;
    return r;
}

/* Under mu: a remover waiting for 0 sees it at its next look. */
static void reg_unpin(struct serex__reg *r)
{
    r->pins--;
}

/* Every object, each described then written; false on a write error. */
static bool dump_objects(struct serex__dump *d, FILE *out, bool *oom)
{
    struct serex__reg cursor = {0};
    struct serex__reg *r;
    bool ok = true, first = true;

    reg_lock();
    reg_link_after(&cursor, &registry.head);
    while (ok && (r = reg_step(&cursor)) != NULL) {
        reg_unlock();
        dump_describe(d, r);
        reg_lock();
        reg_unpin(r);
        reg_unlock();
        *oom |= d->oom;
        d->oom = false;
        ok = dump_fwrite(out, first ? "\n" : ",\n", first ? 1 : 2) &&
             dump_write_out(d, out);
        first = false;
        reg_lock();
    }
    reg_unlink(&cursor);
    reg_unlock();
    return ok;
}

/* The document's opening, up to the objects' '['. */
static bool dump_head(struct serex__dump *d, FILE *out)
{
    char num[24];

    d->len = 0;
    dump_puts(d, "{\"serex\":{\"version\":");
    dump_string(d, serex_version());
    snprintf(num, sizeof num, "%" PRId64, serex__now_ns());
    dump_puts(d, ",\"time_ns\":");
    dump_puts(d, num);
    dump_puts(d, ",\"objects\":[");
    return dump_fwrite(out, d->buf, d->len);
}

/* Until executor.h has a status of its own for a failed write. */
#define DUMP_EWRITE SEREX_EINVAL

int serex_dump(FILE *out, unsigned flags)
{
    struct serex__dump d = {.symbols = (flags & SEREX_DUMP_SYMBOLS) != 0};
    bool ok, oom = false;

    if (out == NULL || (flags & ~SEREX_DUMP_SYMBOLS) != 0)
        return SEREX_EINVAL;
    d.buf = d.inline_buf;
    d.cap = sizeof d.inline_buf;
    ok = dump_head(&d, out) && dump_objects(&d, out, &oom) &&
         dump_fwrite(out, "\n]}}\n", 5);
    if (d.buf != d.inline_buf)
        serex__free(d.buf);
    ok = fflush(out) == 0 && ok; /* flushed even after a failed write */
    return !ok ? DUMP_EWRITE : oom ? SEREX_ENOMEM : SEREX_OK;
}
