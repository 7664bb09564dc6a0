/* SPDX-License-Identifier: MIT */
/*
 * test_nodecache.c - the node cache: distinct, aligned, full-size blocks;
 * LIFO reuse; blocks freed by one thread feeding another thread's
 * allocations through the depot without malloc; trim; and no leak of the
 * blocks an exiting thread still held (ASan's leak check runs at exit);
 * under AddressSanitizer, every byte of a free block poisoned, whether it
 * waits in a thread list or in the depot, and none once handed out again
 * (but the byte after it, so an overflow is caught too).
 *
 * Allocations are counted with serex__alloc_fail_nth(0), which returns how
 * many were made since the previous call. Each test starts from an empty
 * cache (serex__cache_trim) so the counts do not depend on test order.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free, qsort */
#include <string.h> /* memcpy */

#include "nodecache_internal.h"

#ifdef SEREX__CACHE_POISONS
#  include <sanitizer/asan_interface.h> /* __asan_address_is_poisoned */
#endif

#define NBLOCKS 300 /* more than a thread list holds (2 * 64) */
#define NFREED 256  /* what the helper thread frees: four chains */

struct fixture {
    void *blocks[NBLOCKS]; /* held by the test; freed in teardown */
    size_t nblocks;
    enum serex__cache_class cls;
    serex_event *freed; /* the helper thread has freed its blocks */
    serex_event *leave; /* the helper thread may exit */
    int helper_status;  /* the helper's verdict, read after join */
    size_t nhelper;     /* blocks the helper allocates and frees itself */
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);

    if (fx == NULL)
        return -1;
    if (serex_event_create(&fx->freed) != SEREX_OK ||
        serex_event_create(&fx->leave) != SEREX_OK) {
        serex_event_destroy(fx->freed);
        free(fx);
        return -1;
    }
    serex__cache_trim();
    serex__alloc_fail_nth(0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    serex__alloc_fail_nth(0);
    for (size_t i = 0; i < fx->nblocks; i++)
        if (fx->blocks[i] != NULL)
            serex__cache_free(fx->cls, fx->blocks[i]);
    serex__cache_trim();
    serex_event_destroy(fx->freed);
    serex_event_destroy(fx->leave);
    free(fx);
    return 0;
}

/* Allocates @n blocks of @cls into the fixture. */
static void take_blocks(struct fixture *fx, enum serex__cache_class cls,
                        size_t n)
{
    fx->cls = cls;
    for (size_t i = 0; i < n; i++) {
        fx->blocks[i] = serex__cache_alloc(cls);
        assert_non_null(fx->blocks[i]);
        fx->nblocks = i + 1;
    }
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a;
    uintptr_t y = (uintptr_t) * (void *const *)b;

    return x < y ? -1 : x > y;
}

static bool held_block(const struct fixture *fx, const void *p)
{
    for (size_t i = 0; i < fx->nblocks; i++)
        if (fx->blocks[i] == p)
            return true;
    return false;
}

/* --- one thread --- */

static void nodecache_alloc_gives_distinct_aligned_full_blocks(void **state)
{
    struct fixture *fx = *state;
    const size_t class_size[SEREX__NCLASSES] = {32, 64, 128};
    const size_t class_align[SEREX__NCLASSES] = {32, 64, 64};
    void *sorted[NBLOCKS];

    for (int cls = 0; cls < SEREX__NCLASSES; cls++) {
        size_t size = class_size[cls];

        take_blocks(fx, (enum serex__cache_class)cls, NBLOCKS);
        for (size_t i = 0; i < NBLOCKS; i++) {
            uint32_t word = (uint32_t)i;

            assert_int_equal((uintptr_t)fx->blocks[i] % class_align[cls], 0);
            for (size_t off = 0; off < size; off += sizeof word)
                memcpy((char *)fx->blocks[i] + off, &word, sizeof word);
        }
        /* every block still holds its own stamp over its full size */
        for (size_t i = 0; i < NBLOCKS; i++) {
            for (size_t off = 0; off < size; off += sizeof(uint32_t)) {
                uint32_t word;

                memcpy(&word, (char *)fx->blocks[i] + off, sizeof word);
                assert_int_equal(word, (uint32_t)i);
            }
        }
        memcpy(sorted, fx->blocks, sizeof sorted);
        qsort(sorted, NBLOCKS, sizeof sorted[0], cmp_ptr);
        for (size_t i = 1; i < NBLOCKS; i++)
            assert_true((uintptr_t)sorted[i] - (uintptr_t)sorted[i - 1] >=
                        size);
        for (size_t i = 0; i < NBLOCKS; i++) {
            serex__cache_free(fx->cls, fx->blocks[i]);
            fx->blocks[i] = NULL;
        }
        fx->nblocks = 0;
    }
}

static void nodecache_free_then_alloc_reuses_lifo(void **state)
{
    struct fixture *fx = *state;

    for (int c = 0; c < SEREX__NCLASSES; c++) {
        enum serex__cache_class cls = (enum serex__cache_class)c;
        void *a, *b;

        take_blocks(fx, cls, 2);
        a = fx->blocks[0];
        b = fx->blocks[1];
        assert_ptr_not_equal(a, b);
        fx->nblocks = 0; /* both go back to the cache */
        serex__cache_free(cls, a);
        serex__cache_free(cls, b);
        serex__alloc_fail_nth(0);
        fx->blocks[0] = serex__cache_alloc(cls);
        fx->blocks[1] = serex__cache_alloc(cls);
        fx->nblocks = 2;
        assert_ptr_equal(fx->blocks[0], b);
        assert_ptr_equal(fx->blocks[1], a);
        assert_int_equal(serex__alloc_fail_nth(0), 0);
        serex__cache_free(cls, a);
        serex__cache_free(cls, b);
        fx->nblocks = 0;
    }
}

static void nodecache_trim_empties_every_list(void **state)
{
    struct fixture *fx = *state;

    /* enough that the thread list overflows into the depot, too */
    for (int c = 0; c < SEREX__NCLASSES; c++) {
        enum serex__cache_class cls = (enum serex__cache_class)c;

        take_blocks(fx, cls, NBLOCKS);
        for (size_t i = 0; i < NBLOCKS; i++) {
            serex__cache_free(cls, fx->blocks[i]);
            fx->blocks[i] = NULL;
        }
        fx->nblocks = 0;
        /* cached now: reuse makes no allocation */
        serex__alloc_fail_nth(0);
        serex__cache_free(cls, serex__cache_alloc(cls));
        assert_int_equal(serex__alloc_fail_nth(0), 0);
    }
    serex__cache_trim();
    for (int c = 0; c < SEREX__NCLASSES; c++) {
        enum serex__cache_class cls = (enum serex__cache_class)c;
        void *p;

        serex__alloc_fail_nth(0);
        p = serex__cache_alloc(cls);
        assert_non_null(p);
        assert_int_equal(serex__alloc_fail_nth(0), 1); /* nothing was left */
        serex__cache_free(cls, p);
        serex__cache_trim();
    }
}

static void nodecache_allocation_failure_returns_null(void **state)
{
    (void)state;
    /* the cache is empty (setup trimmed it): the next alloc mallocs */
    serex__alloc_fail_nth(1);
    assert_null(serex__cache_alloc(SEREX__CLASS_64));
    serex__alloc_fail_nth(0);
}

/* --- AddressSanitizer: free blocks are poisoned --- */

#ifdef SEREX__CACHE_POISONS
/* Whether every byte of [p, p + n) is poisoned (@want) or none is. */
static bool poisoned_throughout(const void *p, size_t n, bool want)
{
    for (size_t i = 0; i < n; i++)
        if ((__asan_address_is_poisoned((const char *)p + i) != 0) != want)
            return false;
    return true;
}

/* A block handed out: all of its @size is usable, the byte after is not. */
static bool handed_out_whole(const void *p, size_t size)
{
    return poisoned_throughout(p, size, false) &&
           __asan_address_is_poisoned((const char *)p + size) != 0;
}
#endif

static void nodecache_free_poisons_whole_block_until_reallocated(void **state)
{
#ifndef SEREX__CACHE_POISONS
    (void)state;
    skip(); /* only an AddressSanitizer build poisons */
#else
    struct fixture *fx = *state;
    const size_t class_size[SEREX__NCLASSES] = {32, 64, 128};
    void *freed[NBLOCKS];

    for (int c = 0; c < SEREX__NCLASSES; c++) {
        enum serex__cache_class cls = (enum serex__cache_class)c;
        size_t size = class_size[c];
        bool on_free = true, later = true;

        /* NBLOCKS overflows the thread list: chains go to the depot, so
         * both places, and the cache's link writes, are covered */
        take_blocks(fx, cls, NBLOCKS);
        for (size_t i = 0; i < NBLOCKS; i++)
            assert_true(handed_out_whole(fx->blocks[i], size));
        memcpy(freed, fx->blocks, sizeof freed);
        fx->nblocks = 0; /* the cache's now: teardown must not free them */
        for (size_t i = 0; i < NBLOCKS; i++) {
            serex__cache_free(cls, freed[i]);
            on_free = on_free && poisoned_throughout(freed[i], size, true);
        }
        for (size_t i = 0; i < NBLOCKS; i++)
            later = later && poisoned_throughout(freed[i], size, true);
        assert_true(on_free);
        assert_true(later);
        /* handed out again, from the thread list and from the depot */
        take_blocks(fx, cls, NBLOCKS);
        for (size_t i = 0; i < NBLOCKS; i++)
            assert_true(handed_out_whole(fx->blocks[i], size));
        for (size_t i = 0; i < NBLOCKS; i++)
            serex__cache_free(cls, fx->blocks[i]);
        fx->nblocks = 0;
    }
#endif
}

/* --- across threads --- */

/* Frees the fixture's blocks, reports, then waits to be let go. */
static int freeing_thread(void *arg)
{
    struct fixture *fx = arg;

    for (size_t i = 0; i < NFREED; i++)
        serex__cache_free(fx->cls, fx->blocks[i]);
    serex_event_signal(fx->freed);
    if (serex_event_wait(fx->leave, TEST_TIMEOUT) != SEREX_OK)
        fx->helper_status = SEREX_ETIMEDOUT;
    return 0;
}

static void nodecache_blocks_freed_by_other_thread_feed_allocations(
    void **state)
{
    struct fixture *fx = *state;
    void *mine[2 * 64] = {NULL};
    serex__thread t;
    unsigned long made = 1;
    bool all_held = true;
    int rc;

    take_blocks(fx, SEREX__CLASS_64, NFREED);
    assert_int_equal(serex__thread_start(&t, freeing_thread, fx), SEREX_OK);
    rc = serex_event_wait(fx->freed, TEST_TIMEOUT);
    if (rc == SEREX_OK) {
        /* the freeing thread overflowed its list into the depot: two
         * chains of its blocks are there for this thread to take */
        serex__alloc_fail_nth(0);
        for (size_t i = 0; i < 2 * 64; i++)
            mine[i] = serex__cache_alloc(SEREX__CLASS_64);
        made = serex__alloc_fail_nth(0);
    }
    serex_event_signal(fx->leave);
    serex__thread_join(t);
    /* the helper gave the fixture's blocks away: hold the taken ones */
    for (size_t i = 0; i < 2 * 64 && rc == SEREX_OK; i++)
        all_held = all_held && held_block(fx, mine[i]);
    fx->nblocks = 0;
    for (size_t i = 0; i < 2 * 64 && rc == SEREX_OK; i++)
        fx->blocks[fx->nblocks++] = mine[i];
    assert_int_equal(rc, SEREX_OK);
    assert_int_equal(fx->helper_status, SEREX_OK);
    assert_true(all_held);
    assert_int_equal(made, 0);
}

/* Frees the fixture's blocks, plus a few of its own, and exits at once. */
static int exiting_thread(void *arg)
{
    struct fixture *fx = arg;
    void *own[16];

    for (size_t i = 0; i < fx->nhelper; i++)
        own[i] = serex__cache_alloc(fx->cls);
    for (size_t i = 0; i < fx->nblocks; i++)
        serex__cache_free(fx->cls, fx->blocks[i]);
    for (size_t i = 0; i < fx->nhelper; i++)
        serex__cache_free(fx->cls, own[i]);
    return 0;
}

static void nodecache_exiting_thread_leaks_no_block(void **state)
{
    struct fixture *fx = *state;
    void *mine[64];
    serex__thread t;
    unsigned long made;

    /* 100 blocks from this thread and 16 of its own: one chain goes to
     * the depot at exit, the rest is freed (LSan reports any block left
     * in the dead thread's list) */
    fx->nhelper = 16;
    take_blocks(fx, SEREX__CLASS_128, 100);
    assert_int_equal(serex__thread_start(&t, exiting_thread, fx), SEREX_OK);
    serex__thread_join(t);
    for (size_t i = 0; i < fx->nblocks; i++)
        fx->blocks[i] = NULL;

    serex__alloc_fail_nth(0);
    for (size_t i = 0; i < 64; i++)
        mine[i] = serex__cache_alloc(SEREX__CLASS_128);
    made = serex__alloc_fail_nth(0);
    for (size_t i = 0; i < 64; i++)
        serex__cache_free(SEREX__CLASS_128, mine[i]);
    /* a full chain survived the thread, so it was handed on, not lost */
    assert_int_equal(made, 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(nodecache_alloc_gives_distinct_aligned_full_blocks),
        T(nodecache_free_then_alloc_reuses_lifo),
        T(nodecache_trim_empties_every_list),
        T(nodecache_allocation_failure_returns_null),
        T(nodecache_free_poisons_whole_block_until_reallocated),
        T(nodecache_blocks_freed_by_other_thread_feed_allocations),
        T(nodecache_exiting_thread_leaks_no_block),
    };
#undef T

    return cmocka_run_group_tests_name("nodecache", tests, NULL, NULL);
}
