/* SPDX-License-Identifier: MIT */
/*
 * retry_test.c - how to test code that waits and retries, instantly and
 * with exact times: a manual scheduler and a manual executor, and a clock
 * that moves itself (serex_autoclock_start, Tokio's start_paused).
 *
 * The code under test fetches something that fails twice, retrying with a
 * doubling backoff (100 ms, then 200 ms), and gives up at a 1 s deadline.
 * The test never sleeps and never steps the clock: it waits on the
 * result, and the wait runs the manual executor and jumps the clock to
 * each timer. So the attempts happen at exactly 0, 100 and 300 ms of the
 * scheduler's clock, and the program ends at once.
 */
#include <serex/serex.h>

#include <stdio.h>
#include <stdlib.h>

#define FAILURES 2

/* --- the code under test: it knows nothing of tests --- */

struct fetcher {
    serex_scheduler *clock;
    serex_executor *ex;
    serex_future *result; /* a promise: ends with the page, or an error */
    int64_t backoff_ns;
    int attempts;
    int64_t at[8]; /* when each attempt ran */
};

static void attempt(void *arg)
{
    struct fetcher *f = arg;

    f->at[f->attempts++] = serex_scheduler_now(f->clock);
    if (f->attempts > FAILURES) { /* the server answers at last */
        serex_future_complete(f->result, f);
        return;
    }
    if (serex_schedule(f->clock, f->ex, f->backoff_ns, attempt, f, NULL) !=
        SEREX_OK)
        serex_future_fail(f->result, SEREX_EREJECTED);
    f->backoff_ns *= 2;
}

/* --- the test --- */

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "retry_test: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

int main(void)
{
    serex_scheduler_config cfg = {.manual = true};
    struct fetcher f = {.backoff_ns = SEREX_MS(100)};

    check(serex_scheduler_create(&cfg, &f.clock), "scheduler");
    check(serex_manual_create(&f.ex), "manual executor");
    check(serex_autoclock_start(f.clock, &f.ex, 1), "autoclock");

    check(serex_promise_create(&f.result), "promise");
    check(serex_future_deadline(f.result, f.clock, SEREX_SEC(1)), "deadline");
    check(serex_execute(f.ex, attempt, &f), "first attempt");
    check(serex_future_wait(f.result, SEREX_FOREVER), "the result");

    printf("retry_test: %d attempts, at %lld, %lld and %lld ms\n", f.attempts,
           (long long)(f.at[0] / SEREX_MS(1)),
           (long long)(f.at[1] / SEREX_MS(1)),
           (long long)(f.at[2] / SEREX_MS(1)));
    if (f.attempts != 3 || f.at[0] != 0 || f.at[1] != SEREX_MS(100) ||
        f.at[2] != SEREX_MS(300)) {
        fprintf(stderr, "retry_test: wrong attempts or times\n");
        return 1;
    }
    serex_future_release(f.result);
    serex_autoclock_stop(); /* before the scheduler and executor go */
    check(serex_destroy(f.ex), "destroy executor");
    check(serex_destroy(serex_scheduler_executor(f.clock)), "destroy clock");
    printf("retry_test: ok\n");
    return 0;
}
