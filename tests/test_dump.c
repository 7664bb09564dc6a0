/* SPDX-License-Identifier: MIT */
/*
 * test_dump.c - the registry of live objects and serex_dump: objects
 * appear once added and go once removed; the document parses as JSON,
 * with every kind of field, nesting (cut below SEREX__DUMP_DEPTH), odd
 * names escaped and bytes that are not UTF-8 replaced; function names
 * with SEREX_DUMP_SYMBOLS; a describe that runs out of memory leaves a
 * marked object in a whole document; write errors; bad arguments; a
 * remove waits for a describe of its object; dumps on two threads while a
 * third adds and removes objects (run under TSan and ASan).
 *
 * The objects here are fakes with describes of the test's own, through the
 * internal interface (registry_internal.h) the executors use.
 */
#include "test_util.h"

#include <inttypes.h> /* PRIxPTR */
#include <stdio.h>    /* tmpfile, fopen */
#include <stdlib.h>   /* calloc, free */
#include <string.h>

#include "registry_internal.h"
#include "test_json.h"

#if !defined(_WIN32)
#  include "fork_internal.h" /* serex__fork_register: arms the handlers */
#  include <sys/types.h>
#  include <sys/wait.h> /* waitpid */
#  include <unistd.h>   /* fork, alarm, _exit */
#endif
/* fork() in a multi-threaded TSan program: see test_fork.c */
#if defined(__SANITIZE_THREAD__)
#  define TEST_DUMP_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define TEST_DUMP_TSAN 1
#  endif
#endif

/* --- fake objects --- */

enum fake_mode {
    FAKE_FIELDS, /* one field of each type, nested arrays and objects */
    FAKE_BIG,    /* more text than the dump's inline buffer, then a fn */
    FAKE_DEEP,   /* nesting deeper than SEREX__DUMP_DEPTH */
    FAKE_CHURN,  /* checks it is alive, twice, yielding between */
    FAKE_BLOCK   /* waits inside its describe until told to go on */
};

#define FAKE_ALIVE 0x5eed
#define FAKE_DEAD 0xdead
#define BIG_ITEMS 100 /* of 60 bytes each: 6000 > the 4096 inline */

struct fake {
    struct serex__reg reg;
    enum fake_mode mode;
    int magic; /* FAKE_ALIVE until removed */
    /* serex__dump_now in the last describe: atomic, since two dumps may
     * describe one object at once */
    _Atomic int64_t now_seen;
    /* FAKE_CHURN: describes that found the object already removed */
    atomic_int *dead_seen;
    /* FAKE_BLOCK */
    serex_event *entered, *go;
    atomic_int *removed; /* set by the remover once remove returned */
    int removed_seen;    /* what the describe saw of it, at its end */
    int go_rc;
};

/*
 * A task to name. Not static, and the test executable exports its
 * symbols (tests/CMakeLists.txt: ENABLE_EXPORTS, -rdynamic): dladdr reads
 * only the dynamic symbol table, where a program's own functions are
 * only if exported.
 */
void test_dump_exported_task(void *arg);

void test_dump_exported_task(void *arg)
{
    (void)arg;
}

/* A task with no symbol of its own anywhere: named by module+offset. */
static void hidden_task(void *arg)
{
    (void)arg;
}

static void fake_fields(struct fake *f, struct serex__dump *d)
{
    serex__dump_u64(d, "u64", UINT64_MAX);
    serex__dump_i64(d, "i64", -42);
    serex__dump_str(d, "str", "text");
    serex__dump_str(d, "null_str", NULL);
    serex__dump_bool(d, "yes", true);
    serex__dump_bool(d, "no", false);
    serex__dump_ptr(d, "ptr", f);
    serex__dump_ptr(d, "null_ptr", NULL);
    serex__dump_fn(d, "fn", test_dump_exported_task);
    serex__dump_fn(d, "null_fn", NULL);
    serex__dump_array_begin(d, "workers");
    for (uint64_t i = 0; i < 3; i++) {
        serex__dump_object_begin(d, NULL);
        serex__dump_u64(d, "index", i);
        serex__dump_array_begin(d, "empty");
        serex__dump_array_end(d);
        serex__dump_object_end(d);
    }
    serex__dump_u64(d, NULL, 7); /* a plain value in the same array */
    serex__dump_array_end(d);
    serex__dump_object_begin(d, "nested");
    serex__dump_str(d, "deeper", "yes");
    serex__dump_object_end(d);
}

static void fake_big(struct serex__dump *d)
{
    char item[61];

    memset(item, 'x', sizeof item - 1);
    item[sizeof item - 1] = '\0';
    serex__dump_array_begin(d, "big");
    for (int i = 0; i < BIG_ITEMS; i++)
        serex__dump_str(d, NULL, item);
    serex__dump_array_end(d);
    serex__dump_fn(d, "fn", test_dump_exported_task); /* a mark past 4096 */
}

static void fake_deep(struct serex__dump *d)
{
    serex__dump_array_begin(d, "deep");
    for (int i = 1; i < SEREX__DUMP_DEPTH + 4; i++)
        serex__dump_array_begin(d, NULL);
    serex__dump_u64(d, NULL, 7); /* too deep: left out */
    for (int i = 0; i < SEREX__DUMP_DEPTH + 4; i++)
        serex__dump_array_end(d);
    serex__dump_u64(d, "after", 1); /* back at the object's level */
}

static void fake_churn(struct fake *f)
{
    for (int i = 0; i < 2; i++) {
        if (f->magic != FAKE_ALIVE)
            atomic_fetch_add(f->dead_seen, 1);
        serex__thread_yield();
    }
}

static void fake_block(struct fake *f)
{
    serex_event_signal(f->entered);
    f->go_rc = serex_event_wait(f->go, TEST_TIMEOUT);
    f->removed_seen = atomic_load(f->removed);
}

static void fake_describe(struct serex__reg *r, struct serex__dump *d)
{
    struct fake *f = serex__container_of(r, struct fake, reg);

    atomic_store(&f->now_seen, serex__dump_now(d));
    switch (f->mode) {
    case FAKE_FIELDS: fake_fields(f, d); break;
    case FAKE_BIG: fake_big(d); break;
    case FAKE_DEEP: fake_deep(d); break;
    case FAKE_CHURN: fake_churn(f); break;
    case FAKE_BLOCK: fake_block(f); break;
    }
}

static const struct serex__reg_class fake_class = {"fake", fake_describe};
static const struct serex__reg_class bare_class = {"bare", NULL};

/* --- the fixture: the fakes a test made, removed even if it fails --- */

#define FAKES_MAX 8

struct fixture {
    struct fake *fakes[FAKES_MAX];
    size_t base; /* objects registered before the test (none of ours) */
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);

    if (fx == NULL)
        return -1;
    fx->base = serex__reg_count();
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    for (size_t i = 0; i < FAKES_MAX; i++) {
        if (fx->fakes[i] != NULL) {
            serex__reg_remove(&fx->fakes[i]->reg);
            free(fx->fakes[i]);
        }
    }
    free(fx);
    return 0;
}

/* A fake in slot @i of the fixture, added under @name. */
static struct fake *fake_add(struct fixture *fx, size_t i, enum fake_mode m,
                             const struct serex__reg_class *cls,
                             const char *name)
{
    struct fake *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_null(fx->fakes[i]);
    f->mode = m;
    f->magic = FAKE_ALIVE;
    fx->fakes[i] = f;
    serex__reg_add(&f->reg, cls, f, name);
    return f;
}

static void fake_remove(struct fixture *fx, size_t i)
{
    serex__reg_remove(&fx->fakes[i]->reg);
    free(fx->fakes[i]);
    fx->fakes[i] = NULL;
}

/* --- reading a dump back --- */

/* The whole of @f, from its start, NUL-ended (malloc'd); NULL if it
 * cannot be read. Asserts nothing: threads other than main call it. */
static char *read_all(FILE *f)
{
    long n;
    char *text;

    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0)
        return NULL;
    rewind(f);
    if ((text = malloc((size_t)n + 1)) == NULL)
        return NULL;
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

static char *file_text(FILE *f)
{
    char *text = read_all(f);

    assert_non_null(text);
    return text;
}

/* serex_dump(@flags) into a fresh temporary file; its status in *@rc. */
static char *dump_text(unsigned flags, int *rc)
{
    FILE *f = tmpfile();
    char *text;

    assert_non_null(f);
    *rc = serex_dump(f, flags);
    text = file_text(f);
    fclose(f);
    return text;
}

/* A dump that must succeed and parse. */
static struct tj *dump_parse(unsigned flags)
{
    int rc;
    char *text = dump_text(flags, &rc);
    struct tj *doc = tj_parse(text);

    assert_int_equal(rc, SEREX_OK);
    if (doc == NULL)
        print_error("not JSON:\n%s\n", text);
    assert_non_null(doc);
    free(text);
    return doc;
}

static const struct tj *doc_objects(const struct tj *doc)
{
    const struct tj *objects = tj_get(tj_get(doc, "serex"), "objects");

    assert_non_null(objects);
    assert_int_equal(objects->type, TJ_ARR);
    return objects;
}

static void address_text(const void *p, char out[32])
{
    snprintf(out, 32, "0x%" PRIxPTR, (uintptr_t)p);
}

/* The dump's entry for the object at @addr, or NULL. */
static const struct tj *doc_find(const struct tj *doc, const void *addr)
{
    const struct tj *objects = doc_objects(doc);
    char want[32];

    address_text(addr, want);
    for (size_t i = 0; i < objects->n; i++) {
        const struct tj *a = tj_get(&objects->items[i], "address");

        if (a != NULL && a->type == TJ_STR && strcmp(a->str, want) == 0)
            return &objects->items[i];
    }
    return NULL;
}

/* The string at @key of @obj (which must be one). */
static const char *str_at(const struct tj *obj, const char *key)
{
    const struct tj *v = tj_get(obj, key);

    assert_non_null(v);
    assert_int_equal(v->type, TJ_STR);
    return v->str;
}

static double num_at(const struct tj *obj, const char *key)
{
    const struct tj *v = tj_get(obj, key);

    assert_non_null(v);
    assert_int_equal(v->type, TJ_NUM);
    return v->num;
}

/* --- the tests --- */

static void dump_bad_arguments_are_einval_and_write_nothing(void **state)
{
    FILE *f = tmpfile();
    char *text;

    (void)state;
    assert_non_null(f);
    assert_int_equal(serex_dump(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_dump(NULL, SEREX_DUMP_SYMBOLS), SEREX_EINVAL);
    assert_int_equal(serex_dump(f, SEREX_DUMP_SYMBOLS << 1), SEREX_EINVAL);
    assert_int_equal(serex_dump(f, ~0u), SEREX_EINVAL);
    text = file_text(f);
    assert_string_equal(text, "");
    free(text);
    fclose(f);
}

static void dump_document_has_version_time_and_objects(void **state)
{
    int64_t before = test_now_ns(), after;
    struct tj *doc = dump_parse(0);
    const struct tj *top = tj_get(doc, "serex");

    (void)state;
    after = test_now_ns();
    assert_non_null(top);
    assert_string_equal(str_at(top, "version"), serex_version());
    /* the same monotonic clock as the tests' */
    assert_true(num_at(top, "time_ns") >= (double)before);
    assert_true(num_at(top, "time_ns") <= (double)after);
    assert_int_equal(doc_objects(doc)->type, TJ_ARR);
    tj_free(doc);
}

static void dump_lists_added_objects_until_removed(void **state)
{
    struct fixture *fx = *state;
    struct fake *a = fake_add(fx, 0, FAKE_FIELDS, &bare_class, "first");
    struct fake *b = fake_add(fx, 1, FAKE_FIELDS, &bare_class, NULL);
    struct fake *c = fake_add(fx, 2, FAKE_FIELDS, &bare_class, "third");
    struct tj *doc;
    const struct tj *oa, *ob, *oc;

    assert_int_equal(serex__reg_count(), fx->base + 3);
    doc = dump_parse(0);
    oa = doc_find(doc, a), ob = doc_find(doc, b), oc = doc_find(doc, c);
    assert_non_null(oa);
    assert_non_null(ob);
    assert_non_null(oc);
    assert_true(oa < ob && ob < oc); /* in the order they were added */
    assert_string_equal(str_at(oa, "kind"), "bare");
    assert_string_equal(str_at(oa, "name"), "first");
    assert_int_equal(tj_get(ob, "name")->type, TJ_NULL);
    assert_int_equal(oa->n, 3); /* kind, address, name: no describe */
    tj_free(doc);

    fake_remove(fx, 1);
    assert_int_equal(serex__reg_count(), fx->base + 2);
    doc = dump_parse(0);
    assert_non_null(doc_find(doc, a));
    assert_null(doc_find(doc, b));
    assert_non_null(doc_find(doc, c));
    tj_free(doc);
}

static void reg_remove_twice_or_never_added_does_nothing(void **state)
{
    struct fixture *fx = *state;
    struct fake *a = fake_add(fx, 0, FAKE_FIELDS, &bare_class, "a");
    struct serex__reg never = {0};

    serex__reg_remove(&never);
    serex__reg_remove(&a->reg);
    serex__reg_remove(&a->reg);
    assert_int_equal(serex__reg_count(), fx->base);
    serex__reg_add(&a->reg, &bare_class, a, "again"); /* may come back */
    assert_int_equal(serex__reg_count(), fx->base + 1);
}

static void dump_writes_every_field_type_and_nesting(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_FIELDS, &fake_class, "fields");
    int64_t before = test_now_ns();
    struct tj *doc = dump_parse(0);
    const struct tj *o = doc_find(doc, f), *w, *fn;
    char addr[32];

    assert_non_null(o);
    assert_string_equal(str_at(o, "kind"), "fake");
    {
        /* both rounded to double: i386's x87 keeps a literal in extended
         * precision, where 2^64 - 1 is not 2^64 */
        volatile double got = num_at(o, "u64"), want = 18446744073709551615.0;

        assert_true(got == want);
    }
    assert_true(num_at(o, "i64") == -42.0);
    assert_string_equal(str_at(o, "str"), "text");
    assert_int_equal(tj_get(o, "null_str")->type, TJ_NULL);
    assert_true(tj_get(o, "yes")->type == TJ_BOOL && tj_get(o, "yes")->b);
    assert_true(tj_get(o, "no")->type == TJ_BOOL && !tj_get(o, "no")->b);
    address_text(f, addr);
    assert_string_equal(str_at(o, "ptr"), addr);
    assert_int_equal(tj_get(o, "null_ptr")->type, TJ_NULL);
    fn = tj_get(o, "fn");
    assert_int_equal(fn->type, TJ_OBJ);
    assert_int_equal(fn->n, 1); /* no symbol without SEREX_DUMP_SYMBOLS */
    assert_int_equal(str_at(fn, "address")[0], '0');
    assert_int_equal(tj_get(o, "null_fn")->type, TJ_NULL);
    w = tj_get(o, "workers");
    assert_int_equal(w->type, TJ_ARR);
    assert_int_equal(w->n, 4);
    for (size_t i = 0; i < 3; i++) {
        assert_true(num_at(&w->items[i], "index") == (double)i);
        assert_int_equal(tj_get(&w->items[i], "empty")->type, TJ_ARR);
        assert_int_equal(tj_get(&w->items[i], "empty")->n, 0);
    }
    assert_true(w->items[3].type == TJ_NUM && w->items[3].num == 7.0);
    assert_string_equal(str_at(tj_get(o, "nested"), "deeper"), "yes");
    /* the describe's clock: read during this dump */
    assert_true(atomic_load(&f->now_seen) >= before);
    assert_true(atomic_load(&f->now_seen) <= test_now_ns());
    tj_free(doc);
}

/* Every escape, and each way bytes can fail to be UTF-8. */
#define FFFD "\xef\xbf\xbd"
static const char odd_name[] =
    "q\"b\\s/n\nr\rt\tc\x01\x1f"               /* escapes, control bytes */
    "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f" /* e-acute, euro, emoji, DEL */
    "|\xff|\xe2\x82z|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\x80|\xe2";
static const char odd_name_read[] = "q\"b\\s/n\nr\rt\tc\x01\x1f"
                                    "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f"
                                    "|" FFFD "|" FFFD FFFD "z|" FFFD FFFD
                                    "|" FFFD FFFD FFFD "|" FFFD FFFD FFFD FFFD
                                    "|" FFFD "|" FFFD;

static void dump_escapes_odd_names_and_replaces_bad_utf8(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_FIELDS, &bare_class, odd_name);
    int rc;
    char *text = dump_text(0, &rc);
    struct tj *doc = tj_parse(text);

    assert_int_equal(rc, SEREX_OK);
    assert_non_null(doc);
    assert_string_equal(str_at(doc_find(doc, f), "name"), odd_name_read);
    /* the escapes as written: short forms where JSON has them */
    assert_non_null(strstr(text, "q\\\"b\\\\s/n\\nr\\rt\\tc\\u0001\\u001f"));
    assert_null(strchr(text, '\x01')); /* no raw control byte */
    tj_free(doc);
    free(text);
}

static void dump_nesting_deeper_than_the_limit_is_left_out(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_DEEP, &fake_class, "deep");
    struct tj *doc = dump_parse(0);
    const struct tj *o = doc_find(doc, f), *v = tj_get(o, "deep");
    int depth = 0;

    while (v->type == TJ_ARR && v->n == 1) {
        v = &v->items[0];
        depth++;
    }
    /* the object is level 0, "deep" level 1: the innermost array written
     * is at SEREX__DUMP_DEPTH, and empty: what was below it is gone */
    assert_int_equal(v->type, TJ_ARR);
    assert_int_equal(v->n, 0);
    assert_int_equal(depth + 1, SEREX__DUMP_DEPTH);
    assert_true(num_at(o, "after") == 1.0);
    tj_free(doc);
}

static void dump_grows_past_its_inline_buffer(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_BIG, &fake_class, "big");
    struct fake *g = fake_add(fx, 1, FAKE_FIELDS, &fake_class, "after");
    struct tj *doc = dump_parse(SEREX_DUMP_SYMBOLS);
    const struct tj *o = doc_find(doc, f), *big = tj_get(o, "big");

    assert_int_equal(big->n, BIG_ITEMS);
    for (size_t i = 0; i < big->n; i++)
        assert_int_equal(strlen(big->items[i].str), 60);
        /* the symbol's mark survived the buffer's move (Windows names none) */
#if defined(_WIN32)
    assert_null(tj_get(tj_get(o, "fn"), "symbol"));
#else
    assert_non_null(tj_get(tj_get(o, "fn"), "symbol"));
#endif
    assert_string_equal(str_at(doc_find(doc, g), "name"), "after");
    tj_free(doc);
}

static void dump_out_of_memory_marks_the_object_only(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_BIG, &fake_class, "big");
    struct fake *g = fake_add(fx, 1, FAKE_FIELDS, &fake_class, "small");
    int rc;
    char *text;
    struct tj *doc;
    const struct tj *o;

    (void)serex__alloc_fail_nth(1); /* the big object's buffer growth */
    text = dump_text(0, &rc);
    (void)serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_ENOMEM);
    doc = tj_parse(text);
    assert_non_null(doc); /* still whole */
    o = doc_find(doc, f);
    assert_string_equal(str_at(o, "kind"), "fake");
    assert_string_equal(str_at(o, "error"), "out of memory");
    assert_null(tj_get(o, "big"));
    assert_string_equal(str_at(doc_find(doc, g), "str"), "text");
    tj_free(doc);
    free(text);
}

static void dump_symbols_name_functions(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_FIELDS, &fake_class, "sym");
    struct tj *doc = dump_parse(SEREX_DUMP_SYMBOLS);
    const struct tj *fn = tj_get(doc_find(doc, f), "fn");
    char name[256];

    assert_int_equal(fn->type, TJ_OBJ);
#if defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__)
    assert_string_equal(str_at(fn, "symbol"), "test_dump_exported_task");
    /* a static function has no symbol of its own: module+offset */
    assert_true(serex__fn_symbol(hidden_task, name, sizeof name));
    assert_non_null(strstr(name, "test_dump"));
    assert_non_null(strstr(name, "+0x"));
    /* the C library's: glibc names free "__libc_free", its alias */
    assert_true(serex__fn_symbol(free, name, sizeof name));
    assert_non_null(strstr(name, "free"));
    /* cut short, still NUL-ended */
    assert_true(serex__fn_symbol(test_dump_exported_task, name, 5));
    assert_string_equal(name, "test");
#else
    (void)hidden_task;
    assert_false(serex__fn_symbol(hidden_task, name, sizeof name));
    assert_null(tj_get(fn, "symbol"));
#endif
    tj_free(doc);
}

#if defined(__linux__)
/* /dev/full: every write fails (ENOSPC), buffered (caught at the flush)
 * or not (caught at the first fwrite). */
static void dump_write_error_is_reported(void **state)
{
    struct fixture *fx = *state;
    FILE *f;

    (void)fake_add(fx, 0, FAKE_FIELDS, &fake_class, "x");
    f = fopen("/dev/full", "w");
    if (f == NULL)
        skip();
    assert_int_equal(serex_dump(f, 0), SEREX_EINVAL);
    fclose(f);
    f = fopen("/dev/full", "w");
    assert_non_null(f);
    assert_int_equal(setvbuf(f, NULL, _IONBF, 0), 0);
    assert_int_equal(serex_dump(f, SEREX_DUMP_SYMBOLS), SEREX_EINVAL);
    fclose(f);
}
#endif

/* --- a remove waits for a describe of its object --- */

struct remover {
    struct fake *f;
    atomic_int removed;
};

static int remover_main(void *arg)
{
    struct remover *rm = arg;

    serex__reg_remove(&rm->f->reg);
    atomic_store(&rm->removed, 1);
    return 0;
}

struct dumper {
    int rc;
    char *text;
};

static int dumper_main(void *arg)
{
    struct dumper *dp = arg;
    FILE *f = tmpfile();

    dp->rc = f != NULL ? serex_dump(f, 0) : SEREX_ENOMEM;
    if (f != NULL) {
        dp->text = read_all(f);
        fclose(f);
    }
    return 0;
}

static void reg_remove_waits_for_a_describe_in_progress(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_BLOCK, &fake_class, "blocker");
    struct remover rm = {.f = f};
    struct dumper dp = {0};
    serex__thread dumper, remover;
    struct tj *doc;

    f->removed = &rm.removed;
    assert_int_equal(serex_event_create(&f->entered), SEREX_OK);
    assert_int_equal(serex_event_create(&f->go), SEREX_OK);
    assert_int_equal(serex__thread_start(&dumper, dumper_main, &dp), SEREX_OK);
    assert_signalled(f->entered); /* the dump is inside the describe */
    assert_int_equal(serex__thread_start(&remover, remover_main, &rm),
                     SEREX_OK);
    /* Give the remover time to reach its wait; if it did not wait, the
     * describe sees `removed` set. A slow remover only makes the test
     * weaker this run, never wrong. */
    test_sleep_ns(20 * MS);
    serex_event_signal(f->go);
    serex__thread_join(dumper);
    serex__thread_join(remover);
    assert_int_equal(f->go_rc, SEREX_OK);
    assert_int_equal(f->removed_seen, 0);
    assert_int_equal(atomic_load(&rm.removed), 1);
    assert_int_equal(dp.rc, SEREX_OK);
    doc = tj_parse(dp.text);
    assert_non_null(doc);
    assert_non_null(doc_find(doc, f)); /* listed: it was there when read */
    tj_free(doc);
    free(dp.text);
    serex_event_destroy(f->entered);
    serex_event_destroy(f->go);
    free(f);
    fx->fakes[0] = NULL; /* removed by the remover */
}

/* --- real objects: each kind lists itself --- */

/* One blocked pool task: it says it started, then waits to be let go. */
struct blocker {
    serex_event *started, *release;
    int wait_rc;
};

/* Exported, like test_dump_exported_task, for the dump's symbols. */
void test_dump_blocking_task(void *arg);

void test_dump_blocking_task(void *arg)
{
    struct blocker *b = arg;

    serex_event_signal(b->started);
    b->wait_rc = serex_event_wait(b->release, TEST_TIMEOUT);
}

static void noop_task(void *arg)
{
    (void)arg;
}

/* One of each kind; the pool's two workers held by blockers, so what is
 * queued on it stays queued while the dump is taken. */
struct world {
    struct blocker blockers[2];
    serex_executor *pool, *serial, *limiter, *manual;
    serex_striped *striped;
    serex_scheduler *sched;
    serex_timer *timers[2];
    serex_gate *gate;
    serex_channel *channel;
    serex_group *group;
    int item;
};

static void world_block_pool(struct world *w)
{
    serex_pool_config pc = {.threads = 2, .name = "dump-pool"};

    assert_int_equal(serex_pool_create(&pc, &w->pool), SEREX_OK);
    for (int i = 0; i < 2; i++) {
        struct blocker *b = &w->blockers[i];

        assert_int_equal(serex_event_create(&b->started), SEREX_OK);
        assert_int_equal(serex_event_create(&b->release), SEREX_OK);
        assert_int_equal(serex_execute(w->pool, test_dump_blocking_task, b),
                         SEREX_OK);
    }
    for (int i = 0; i < 2; i++)
        assert_signalled(w->blockers[i].started);
    for (int i = 0; i < 3; i++)
        assert_int_equal(serex_execute(w->pool, noop_task, NULL), SEREX_OK);
}

static void world_make(struct world *w)
{
    serex_serial_config sc = {.name = "dump-serial"};
    serex_scheduler_config kc = {.manual = true};

    memset(w, 0, sizeof *w);
    world_block_pool(w);
    assert_int_equal(serex_serial_create(w->pool, &sc, &w->serial), SEREX_OK);
    assert_int_equal(serex_execute(w->serial, noop_task, NULL), SEREX_OK);
    assert_int_equal(serex_striped_create(w->pool, NULL, &w->striped),
                     SEREX_OK);
    for (uint64_t key = 1; key <= 3; key++)
        assert_int_equal(
            serex_striped_execute(w->striped, key, noop_task, NULL), SEREX_OK);
    assert_int_equal(serex_limiter_create(w->pool, 1, &w->limiter), SEREX_OK);
    assert_int_equal(serex_manual_create(&w->manual), SEREX_OK);
    assert_int_equal(serex_scheduler_create(&kc, &w->sched), SEREX_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(serex_schedule(w->sched, w->manual, SEREX_SEC(3600),
                                        noop_task, NULL, &w->timers[i]),
                         SEREX_OK);
    assert_int_equal(serex_gate_create(false, &w->gate), SEREX_OK);
    assert_int_equal(serex_gate_execute(w->gate, w->manual, noop_task, NULL),
                     SEREX_OK);
    assert_int_equal(serex_channel_create(4, &w->channel), SEREX_OK);
    assert_int_equal(
        serex_channel_send(w->channel, &w->item, w->manual, noop_task, NULL),
        SEREX_OK);
    assert_int_equal(serex_group_create(&w->group), SEREX_OK);
    serex_group_enter(w->group);
}

/* Everything gone again, in the reverse order. */
static void world_destroy(struct world *w)
{
    (void)test_run_all(w->manual); /* the channel's on_sent */
    serex_group_leave(w->group);
    serex_group_destroy(w->group);
    serex_channel_destroy(w->channel);
    (void)serex_gate_destroy(w->gate, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        (void)serex_timer_cancel(w->timers[i]);
        serex_timer_release(w->timers[i]);
    }
    assert_int_equal(serex_destroy(serex_scheduler_executor(w->sched)),
                     SEREX_OK);
    assert_int_equal(serex_destroy(w->manual), SEREX_OK);
    assert_int_equal(serex_destroy(w->limiter), SEREX_OK);
    for (int i = 0; i < 2; i++)
        serex_event_signal(w->blockers[i].release);
    assert_int_equal(serex_destroy(serex_striped_executor(w->striped)),
                     SEREX_OK);
    assert_int_equal(serex_destroy(w->serial), SEREX_OK);
    assert_int_equal(serex_destroy(w->pool), SEREX_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(w->blockers[i].wait_rc, SEREX_OK);
        serex_event_destroy(w->blockers[i].started);
        serex_event_destroy(w->blockers[i].release);
    }
}

/* The entry for @addr, which must be there, of kind @kind. */
static const struct tj *doc_expect(const struct tj *doc, const void *addr,
                                   const char *kind)
{
    const struct tj *o = doc_find(doc, addr);

    if (o == NULL)
        print_error("no %s at %p in the dump\n", kind, addr);
    assert_non_null(o);
    assert_string_equal(str_at(o, "kind"), kind);
    return o;
}

/* A function field's address is @fn's. */
static void assert_fn_is(const struct tj *fn, serex_fn want)
{
    char text[32];

    snprintf(text, sizeof text, "0x%" PRIxPTR, (uintptr_t)want);
    assert_non_null(fn);
    assert_int_equal(fn->type, TJ_OBJ);
    assert_string_equal(str_at(fn, "address"), text);
}

static void check_pool(const struct tj *doc, const struct world *w)
{
    const struct tj *o = doc_expect(doc, w->pool, "pool");
    const struct tj *workers = tj_get(o, "workers");

    assert_string_equal(str_at(o, "name"), "dump-pool");
    assert_true(num_at(o, "threads") == 2.0);
    assert_true(num_at(o, "queued") >= 3.0); /* behind the blockers */
    assert_non_null(workers);
    assert_int_equal(workers->n, 2);
    for (size_t i = 0; i < 2; i++)
        assert_fn_is(tj_get(&workers->items[i], "running"),
                     test_dump_blocking_task);
}

static void check_wrappers(const struct tj *doc, const struct world *w)
{
    char pool[32];
    const struct tj *o;

    address_text(w->pool, pool);
    o = doc_expect(doc, w->serial, "serial");
    assert_string_equal(str_at(o, "name"), "dump-serial");
    assert_string_equal(str_at(o, "target"), pool);
    assert_true(num_at(o, "queued") == 1.0);
    o = doc_expect(doc, serex_striped_executor(w->striped), "striped");
    assert_string_equal(str_at(o, "target"), pool);
    assert_true(num_at(o, "lanes") == 3.0);
    o = doc_expect(doc, w->limiter, "limiter");
    assert_string_equal(str_at(o, "target"), pool);
    assert_true(num_at(o, "max_running") == 1.0);
}

static void check_others(const struct tj *doc, const struct world *w)
{
    const struct tj *o, *parked;

    o = doc_expect(doc, serex_scheduler_executor(w->sched), "scheduler");
    assert_true(num_at(o, "pending_timers") == 2.0);
    (void)doc_expect(doc, w->manual, "manual");
    o = doc_expect(doc, w->gate, "gate");
    assert_false(tj_get(o, "open")->b);
    parked = tj_get(o, "parked");
    assert_non_null(parked);
    assert_int_equal(parked->n, 1);
    assert_fn_is(tj_get(&parked->items[0], "fn"), noop_task);
    assert_true(num_at(o, "parked_count") == 1.0);
    o = doc_expect(doc, w->channel, "channel");
    assert_true(num_at(o, "items") == 1.0);
    assert_true(num_at(o, "capacity") == 4.0);
    o = doc_expect(doc, w->group, "group");
    assert_true(num_at(o, "members") == 1.0);
}

static void dump_lists_every_kind_of_live_object(void **state)
{
    struct fixture *fx = *state;
    struct world w;
    struct tj *doc;

    world_make(&w);
    doc = dump_parse(SEREX_DUMP_SYMBOLS);
    check_pool(doc, &w);
    check_wrappers(doc, &w);
    check_others(doc, &w);
    tj_free(doc);
    world_destroy(&w);
    assert_int_equal(serex__reg_count(), fx->base);
    doc = dump_parse(0);
    assert_null(doc_find(doc, w.pool)); /* gone with its destroy */
    tj_free(doc);
}

#if !defined(_WIN32)
/* The child's part: the object the parent's dump had pinned can go, and a
 * dump works. Exit status 0 if so; a hang ends with SIGALRM. */
static void fork_child_checks(struct fixture *fx, struct fake *f)
{
    FILE *out = tmpfile();
    char *text;
    const struct tj *objects;

    /* no cmocka assert here: a failure would go on with the next test in
     * the child */
    alarm(10);
    serex__reg_remove(&f->reg); /* its pin was the parent dumper's */
    if (serex__reg_count() != fx->base || out == NULL ||
        serex_dump(out, 0) != SEREX_OK || (text = read_all(out)) == NULL)
        _exit(1);
    objects = tj_get(tj_get(tj_parse(text), "serex"), "objects");
    _exit(objects != NULL && objects->n == fx->base ? 0 : 2);
}

/* fork() while a dump on another thread is inside a describe: in the
 * child that dump will never finish, and its pin must not hold up the
 * object's destroy there (fork.c: serex__reg_fork_child). */
static void reg_fork_child_drops_the_parent_dumps(void **state)
{
    struct fixture *fx = *state;
    struct fake *f = fake_add(fx, 0, FAKE_BLOCK, &fake_class, "pinned");
    atomic_int removed = 0;
    struct dumper dp = {0};
    serex__thread dumper;
    int status = -1;
    pid_t pid;

#  if defined(TEST_DUMP_TSAN)
    skip();
#  endif
    (void)serex__fork_register();
    f->removed = &removed;
    assert_int_equal(serex_event_create(&f->entered), SEREX_OK);
    assert_int_equal(serex_event_create(&f->go), SEREX_OK);
    assert_int_equal(serex__thread_start(&dumper, dumper_main, &dp), SEREX_OK);
    assert_signalled(f->entered);
    pid = fork();
    if (pid == 0)
        fork_child_checks(fx, f);
    serex_event_signal(f->go);
    serex__thread_join(dumper);
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(dp.rc, SEREX_OK);
    free(dp.text);
    serex_event_destroy(f->entered);
    serex_event_destroy(f->go);
}
#endif

/* --- dumps racing adds and removes --- */

#define CHURN_ROUNDS 200 /* at least; more while the dumps go on */
#define CHURN_OBJECTS 6
#define RACE_DUMPS 60

struct race {
    atomic_int stop;      /* the dumpers are done */
    atomic_int rounds;    /* of the churner */
    atomic_int dead_seen; /* describes of removed objects: must stay 0 */
    atomic_int bad_docs;  /* dumps that failed or did not parse */
};

static int churn_main(void *arg)
{
    struct race *race = arg;
    struct fake *f[CHURN_OBJECTS];

    for (int round = 0; round < CHURN_ROUNDS || !atomic_load(&race->stop);
         round++) {
        for (int i = 0; i < CHURN_OBJECTS; i++) {
            f[i] = calloc(1, sizeof *f[i]); /* fresh: ASan sees a late read */
            if (f[i] == NULL)
                abort();
            f[i]->mode = FAKE_CHURN;
            f[i]->magic = FAKE_ALIVE;
            f[i]->dead_seen = &race->dead_seen;
            serex__reg_add(&f[i]->reg, &fake_class, f[i], "churn");
        }
        /* out of order, so cursors see neighbours go on both sides */
        for (int i = 0; i < CHURN_OBJECTS; i++) {
            int j = (i * 5 + round) % CHURN_OBJECTS;

            serex__reg_remove(&f[j]->reg);
            f[j]->magic = FAKE_DEAD;
            free(f[j]);
        }
        atomic_fetch_add(&race->rounds, 1);
    }
    return 0;
}

static void race_dump_once(struct race *race)
{
    FILE *f = tmpfile();
    char *text = NULL;
    struct tj *doc = NULL;

    if (f != NULL && serex_dump(f, SEREX_DUMP_SYMBOLS) == SEREX_OK &&
        (text = read_all(f)) != NULL)
        doc = tj_parse(text);
    if (doc == NULL)
        atomic_fetch_add(&race->bad_docs, 1);
    tj_free(doc);
    free(text);
    if (f != NULL)
        fclose(f);
}

static int race_dumper_main(void *arg)
{
    struct race *race = arg;

    for (int i = 0; i < RACE_DUMPS; i++)
        race_dump_once(race);
    return 0;
}

static void dump_races_objects_added_and_removed(void **state)
{
    struct fixture *fx = *state;
    struct race race = {0};
    serex__thread churn, other;

    (void)fake_add(fx, 0, FAKE_FIELDS, &fake_class, "steady");
    assert_int_equal(serex__thread_start(&churn, churn_main, &race), SEREX_OK);
    assert_int_equal(serex__thread_start(&other, race_dumper_main, &race),
                     SEREX_OK);
    race_dumper_main(&race);
    serex__thread_join(other);
    atomic_store(&race.stop, 1);
    serex__thread_join(churn);
    assert_int_equal(atomic_load(&race.dead_seen), 0);
    assert_int_equal(atomic_load(&race.bad_docs), 0);
    assert_true(atomic_load(&race.rounds) >= CHURN_ROUNDS);
    assert_int_equal(serex__reg_count(), fx->base + 1);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(dump_bad_arguments_are_einval_and_write_nothing),
        T(dump_document_has_version_time_and_objects),
        T(dump_lists_added_objects_until_removed),
        T(reg_remove_twice_or_never_added_does_nothing),
        T(dump_writes_every_field_type_and_nesting),
        T(dump_escapes_odd_names_and_replaces_bad_utf8),
        T(dump_nesting_deeper_than_the_limit_is_left_out),
        T(dump_grows_past_its_inline_buffer),
        T(dump_out_of_memory_marks_the_object_only),
        T(dump_symbols_name_functions),
#if defined(__linux__)
        T(dump_write_error_is_reported),
#endif
        T(reg_remove_waits_for_a_describe_in_progress),
        T(dump_races_objects_added_and_removed),
        T(dump_lists_every_kind_of_live_object),
#if !defined(_WIN32)
        T(reg_fork_child_drops_the_parent_dumps),
#endif
    };

    return cmocka_run_group_tests_name("dump", tests, NULL, NULL);
}
