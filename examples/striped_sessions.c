/* SPDX-License-Identifier: MIT */
/*
 * striped_sessions.c - per-connection order on a small shared pool.
 *
 * A server gets messages for many connections at once. Each connection's
 * messages must be handled in arrival order, but one thread per connection
 * would be wasteful: a striped executor keyed by connection id runs each
 * connection's handlers one at a time, in order, while different
 * connections share the pool's 2 threads. Messages arrive interleaved
 * (message 0 of every connection, then message 1, ...); every handler
 * appends to its connection's log with no lock, since the striped never
 * runs two handlers of one connection at once. At the end every log must
 * read 0, 1, 2, ... and no lane may be left alive.
 */
#include <serex/serex.h>

#include <stdio.h>
#include <stdlib.h>

#define CONNECTIONS 200
#define MESSAGES 50

struct connection {
    unsigned log[MESSAGES]; /* message numbers, in the order handled */
    unsigned handled;       /* plain: only this connection's handlers */
};

struct message {
    struct connection *conn;
    unsigned seq;           /* its number on its connection */
};

static struct connection conns[CONNECTIONS];
static struct message msgs[MESSAGES][CONNECTIONS];

static void handle_message(void *arg)
{
    struct message *m = arg;
    struct connection *c = m->conn;

    if (c->handled < MESSAGES)
        c->log[c->handled] = m->seq;
    c->handled++;
}

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "striped_sessions: %s: %s\n", what,
                serex_strerror(status));
        exit(1);
    }
}

/* 0 if every connection handled all its messages, in order. */
static int verify(void)
{
    for (unsigned c = 0; c < CONNECTIONS; c++) {
        if (conns[c].handled != MESSAGES) {
            fprintf(stderr, "striped_sessions: connection %u handled %u of "
                            "%u messages\n", c, conns[c].handled, MESSAGES);
            return -1;
        }
        for (unsigned i = 0; i < MESSAGES; i++)
            if (conns[c].log[i] != i) {
                fprintf(stderr, "striped_sessions: connection %u: message "
                                "%u handled at position %u\n", c,
                        conns[c].log[i], i);
                return -1;
            }
    }
    return 0;
}

int main(void)
{
    serex_pool_config cfg = {.threads = 2, .name = "sessions"};
    serex_executor *pool;
    serex_striped *striped;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_striped_create(pool, NULL, &striped), "striped_create");
    for (unsigned i = 0; i < MESSAGES; i++) /* interleaved arrivals */
        for (unsigned c = 0; c < CONNECTIONS; c++) {
            msgs[i][c] = (struct message){&conns[c], i};
            check(serex_striped_execute(striped, c, handle_message,
                                        &msgs[i][c]), "striped_execute");
        }
    /* Wait for every handler; their writes are then visible here. */
    serex_executor *ex = serex_striped_executor(striped);
    serex_shutdown(ex);
    check(serex_await_termination(ex, SEREX_FOREVER), "await_termination");
    size_t lanes = serex_striped_lanes(striped);
    check(serex_destroy(ex), "destroy striped");
    check(serex_destroy(pool), "destroy pool");
    if (verify() != 0)
        return 1;
    printf("striped_sessions: %u connections x %u messages on a 2-thread "
           "pool, each connection in order\n", CONNECTIONS, MESSAGES);
    printf("striped_sessions: lanes alive after the drain: %zu\n", lanes);
    if (lanes != 0) {
        fprintf(stderr, "striped_sessions: idle lanes were not freed\n");
        return 1;
    }
    printf("striped_sessions: ok\n");
    return 0;
}
