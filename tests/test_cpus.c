/* SPDX-License-Identifier: MIT */
/*
 * test_cpus.c - serex_cpu_count, the CPUs this process may use: the cgroup
 * quota reader of src/cpus.c on fake trees, its rule (the smaller of the
 * affinity and the quota, rounded up, at least 1, the online CPUs without
 * memory), and a pool of threads = 0 sized by it.
 *
 * Each fake tree lives in a fresh temporary directory (mkdtemp), which is
 * the root serex__cgroup_cpu_limit prefixes to every path it opens: it
 * holds proc/self/cgroup, proc/self/mountinfo and the cgroup directories
 * under the mount points the fake mountinfo names (sys/fs/cgroup...).
 * Affinity and online counts are given to serex__cpu_count_at, so the
 * answers do not depend on the machine that runs the test.
 */
#include "test_util.h"

#include <stdio.h>  /* fopen, snprintf, remove */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* strlen */

#if !defined(_WIN32)
#  include <sys/stat.h> /* mkdir */
#  include <unistd.h>   /* mkdtemp (stdlib.h on some systems), rmdir */
#endif

#define MAXPATHS 64
#define AFFINITY 8u /* what the fake process's mask holds */
#define ONLINE 16u  /* and the fake machine */

/* A v2 mountinfo line: the unified hierarchy at /sys/fs/cgroup. */
#define MOUNT_V2                                                            \
  "24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - " \
  "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
/* Mounts that are not cgroups come first in a real file. */
#define MOUNT_OTHERS                                               \
  "21 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n" \
  "22 21 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=8000k\n"

struct fixture {
    char root[256];
    char made[MAXPATHS][1024]; /* removed last-made first */
    int nmade;
};

/* --- the fake tree --- */

#if !defined(_WIN32)

/* Remembers @rel (under the root) for teardown; returns the full path. */
static const char *track(struct fixture *f, const char *rel)
{
    char path[sizeof f->made[0]];

    assert_true(f->nmade < MAXPATHS);
    /* built apart: @rel may be one of f->made (snprintf's restrict) */
    snprintf(path, sizeof path, "%s/%s", f->root, rel);
    memcpy(f->made[f->nmade], path, sizeof path);
    return f->made[f->nmade++];
}

/* Makes the directory @rel under the root, and each one above it. */
static void make_dir(struct fixture *f, const char *rel)
{
    char part[512];
    size_t n = strlen(rel);

    for (size_t i = 1; i <= n; i++) {
        if (rel[i] != '/' && rel[i] != '\0')
            continue;
        char path[sizeof f->made[0]];

        snprintf(part, sizeof part, "%.*s", (int)i, rel);
        snprintf(path, sizeof path, "%s/%s", f->root, part);
        if (mkdir(path, 0700) == 0)
            (void)track(f, part);
    }
}

/* Writes @text to the file @rel under the root (its directories made). */
static void write_file(struct fixture *f, const char *rel, const char *text)
{
    const char *slash = strrchr(rel, '/');
    FILE *out;

    if (slash != NULL) {
        char dir[512];

        snprintf(dir, sizeof dir, "%.*s", (int)(slash - rel), rel);
        make_dir(f, dir);
    }
    out = fopen(track(f, rel), "w");
    assert_non_null(out);
    assert_int_equal(fputs(text, out) >= 0, 1);
    assert_int_equal(fclose(out), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    const char *tmp = getenv("TMPDIR");

    assert_non_null(f);
    snprintf(f->root, sizeof f->root, "%s/serex-cpus-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->root));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    while (f->nmade > 0)
        (void)remove(f->made[--f->nmade]); /* files, then empty dirs */
    (void)rmdir(f->root);
    free(f);
    return 0;
}

#else /* _WIN32: no fake trees (the reader is Linux's); see each test */

static void write_file(struct fixture *f, const char *rel, const char *text)
{
    (void)f;
    (void)rel;
    (void)text;
    skip();
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    serex__alloc_fail_nth(0);
    free(*state);
    return 0;
}

#endif

/* The answer for the fake tree: affinity AFFINITY, ONLINE online. */
static unsigned count(struct fixture *f)
{
    return serex__cpu_count_at(f->root, AFFINITY, ONLINE);
}

/* The limit alone (0: none). */
static unsigned limit(struct fixture *f)
{
    unsigned n = 12345;

    assert_int_equal(serex__cgroup_cpu_limit(f->root, &n), SEREX_OK);
    return n;
}

/* A v2 process in /@path, the unified hierarchy at /sys/fs/cgroup. */
static void v2_process_in(struct fixture *f, const char *path)
{
    char line[256];

    snprintf(line, sizeof line, "0::%s\n", path);
    write_file(f, "proc/self/cgroup", line);
    write_file(f, "proc/self/mountinfo", MOUNT_OTHERS MOUNT_V2);
}

/* Writes cpu.max of the v2 cgroup @path (relative to the mount). */
static void v2_cpu_max(struct fixture *f, const char *path, const char *max)
{
    char rel[256];

    snprintf(rel, sizeof rel, "sys/fs/cgroup%s/cpu.max", path);
    write_file(f, rel, max);
}

/* --- cgroup v2 --- */

static void cpus_v2_quota_of_one_and_a_half_is_two(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "150000 100000\n");
    assert_int_equal(limit(f), 2);
    assert_int_equal(count(f), 2);
}

static void cpus_v2_whole_quota_is_not_rounded_up(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "400000 100000\n");
    assert_int_equal(count(f), 4);
}

static void cpus_v2_max_is_the_affinity(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "max 100000\n");
    assert_int_equal(limit(f), 0);
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_quota_below_one_cpu_is_one(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "5000 100000\n"); /* 0.05 CPU */
    assert_int_equal(count(f), 1);
}

static void cpus_quota_above_the_affinity_is_the_affinity(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "3200000 100000\n"); /* 32 CPUs */
    assert_int_equal(limit(f), 32);
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_v2_smaller_limit_in_a_parent_wins(void **state)
{
    struct fixture *f = *state;

    /* the process's own cgroup says max; its grandparent 2.5 CPUs, its
     * parent 6: the kernel throttles the grandparent's subtree at 2.5 */
    v2_process_in(f, "/kubepods/pod1/ctr");
    v2_cpu_max(f, "/kubepods/pod1/ctr", "max 100000\n");
    v2_cpu_max(f, "/kubepods/pod1", "600000 100000\n");
    v2_cpu_max(f, "/kubepods", "250000 100000\n");
    assert_int_equal(count(f), 3);
}

static void cpus_v2_smaller_limit_in_the_child_wins(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/a/b");
    v2_cpu_max(f, "/a/b", "100000 100000\n");
    v2_cpu_max(f, "/a", "600000 100000\n");
    assert_int_equal(count(f), 1);
}

static void cpus_v2_limit_at_the_mount_counts(void **state)
{
    struct fixture *f = *state;

    /* a container with a cgroup namespace: its cgroup is "/", and its
     * mount's own cpu.max is its limit */
    v2_process_in(f, "/");
    write_file(f, "sys/fs/cgroup/cpu.max", "300000 100000\n");
    assert_int_equal(count(f), 3);
}

static void cpus_v2_walk_stops_at_the_mount_point(void **state)
{
    struct fixture *f = *state;

    /* a cpu.max above the mount point is not part of the hierarchy */
    v2_process_in(f, "/app");
    write_file(f, "sys/fs/cpu.max", "100000 100000\n");
    write_file(f, "sys/cpu.max", "100000 100000\n");
    write_file(f, "cpu.max", "100000 100000\n");
    v2_cpu_max(f, "/app", "max 100000\n");
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_v2_mount_with_escaped_path_is_found(void **state)
{
    struct fixture *f = *state;

    /* mountinfo writes a space as \040 */
    write_file(f, "proc/self/cgroup", "0::/app\n");
    write_file(f, "proc/self/mountinfo",
               MOUNT_OTHERS "30 21 0:26 / /my\\040cgroups rw shared:9 - "
                            "cgroup2 cgroup2 rw\n");
    write_file(f, "my cgroups/app/cpu.max", "200000 100000\n");
    assert_int_equal(count(f), 2);
}

static void cpus_v2_mount_of_a_subtree_is_followed(void **state)
{
    struct fixture *f = *state;

    /* the first cgroup2 mount shows another subtree (root /other): not
     * ours; the second shows /kube, above our /kube/app */
    write_file(f, "proc/self/cgroup", "0::/kube/app\n");
    write_file(f, "proc/self/mountinfo",
               "30 21 0:26 /other /mnt/other rw - cgroup2 cgroup2 rw\n"
               "31 21 0:26 /kube /mnt/kube rw - cgroup2 cgroup2 rw\n");
    write_file(f, "mnt/other/kube/app/cpu.max", "100000 100000\n");
    write_file(f, "mnt/kube/app/cpu.max", "300000 100000\n");
    assert_int_equal(count(f), 3);
}

/* --- cgroup v1 --- */

#define MOUNT_V1_CPU(root)                                                \
  "35 25 0:30 " root " /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:13 - " \
  "cgroup cgroup rw,cpu,cpuacct\n"
#define MOUNT_V1_MEMORY                                              \
  "36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:14 - cgroup " \
  "cgroup rw,memory\n"

static void v1_files(struct fixture *f, const char *dir, const char *quota,
                     const char *period)
{
    char rel[256];

    snprintf(rel, sizeof rel, "sys/fs/cgroup/cpu,cpuacct%s/cpu.cfs_quota_us",
             dir);
    write_file(f, rel, quota);
    snprintf(rel, sizeof rel, "sys/fs/cgroup/cpu,cpuacct%s/cpu.cfs_period_us",
             dir);
    write_file(f, rel, period);
}

static void cpus_v1_quota_is_read(void **state)
{
    struct fixture *f = *state;

    write_file(f, "proc/self/cgroup",
               "12:memory:/svc\n4:cpu,cpuacct:/svc\n1:name=systemd:/svc\n");
    write_file(f, "proc/self/mountinfo",
               MOUNT_OTHERS MOUNT_V1_MEMORY MOUNT_V1_CPU("/"));
    v1_files(f, "/svc", "250000\n", "100000\n");
    assert_int_equal(count(f), 3);
}

static void cpus_v1_quota_minus_one_is_the_affinity(void **state)
{
    struct fixture *f = *state;

    write_file(f, "proc/self/cgroup", "4:cpu,cpuacct:/svc\n");
    write_file(f, "proc/self/mountinfo", MOUNT_V1_CPU("/"));
    v1_files(f, "/svc", "-1\n", "100000\n");
    assert_int_equal(limit(f), 0);
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_v1_container_sees_its_cgroup_as_the_mount(void **state)
{
    struct fixture *f = *state;

    /* docker without a cgroup namespace: /proc/self/cgroup names the host
     * path, the mount's root is that same path */
    write_file(f, "proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n");
    write_file(f, "proc/self/mountinfo", MOUNT_V1_CPU("/docker/abc"));
    v1_files(f, "", "150000\n", "100000\n");
    assert_int_equal(count(f), 2);
}

static void cpus_v1_cpu_controller_wins_over_v2(void **state)
{
    struct fixture *f = *state;

    /* a hybrid system: v1 has the cpu controller, so v2's file is not it */
    write_file(f, "proc/self/cgroup", "0::/svc\n4:cpu,cpuacct:/svc\n");
    write_file(f, "proc/self/mountinfo", MOUNT_V2 MOUNT_V1_CPU("/"));
    v2_cpu_max(f, "/svc", "100000 100000\n");
    v1_files(f, "/svc", "500000\n", "100000\n");
    assert_int_equal(count(f), 5);
}

/* --- missing and malformed: the affinity, never 0, never a failure --- */

static void cpus_no_proc_files_is_the_affinity(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(limit(f), 0);
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_no_mount_is_the_affinity(void **state)
{
    struct fixture *f = *state;

    write_file(f, "proc/self/cgroup", "0::/app\n");
    write_file(f, "proc/self/mountinfo", MOUNT_OTHERS);
    v2_cpu_max(f, "/app", "100000 100000\n");
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_no_cpu_max_file_is_the_affinity(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_garbage_is_the_affinity(void **state)
{
    struct fixture *f = *state;
    static const char *const bad[] = {
        "",
        "\n",
        "max",
        "abc def\n",
        "150000\n",
        "150000 0\n",
        "0 100000\n",
        "-5 100000\n",
        "1e5 100000\n",
        "99999999999999999999999 100000\n",
        "150000\t100000\n",
    };

    v2_process_in(f, "/app");
    write_file(f, "sys/fs/cgroup/app/cpu.max", "");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *out = fopen(f->made[f->nmade - 1], "w");

        assert_non_null(out);
        fputs(bad[i], out);
        assert_int_equal(fclose(out), 0);
        assert_int_equal(limit(f), 0);
        assert_int_equal(count(f), AFFINITY);
    }
}

static void cpus_garbage_proc_files_are_the_affinity(void **state)
{
    struct fixture *f = *state;

    /* a limit is there to be found, by a reader that misparses */
    v2_cpu_max(f, "/app", "100000 100000\n");
    write_file(f, "proc/self/cgroup", "garbage\n::\n7\n0:\n0:x:/app\n");
    write_file(f, "proc/self/mountinfo", MOUNT_V2);
    assert_int_equal(count(f), AFFINITY);
    write_file(f, "proc/self/cgroup", "0::/app\n");
    write_file(f, "proc/self/mountinfo",
               "nonsense\n1 2 3\n"
               "24 30 0:22 / /sys/fs/cgroup rw - cgroup2\n"
               "24 30 0:22 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n"
               "25 30 0:22 / /sys/fs/cgroup\\9 rw - cgroup2 cgroup2 rw\n"
               "26 30 0:22 / /sys/fs/cgroup rw - cgroup cgroup rw,memory\n");
    assert_int_equal(count(f), AFFINITY);
}

static void cpus_overlong_lines_are_skipped(void **state)
{
    struct fixture *f = *state;
    size_t n = 70000;
    char *text = malloc(n + sizeof MOUNT_V2 + 8);

    assert_non_null(text);
    /* a mount line longer than any buffer, then the real one */
    memset(text, 'x', n);
    text[n] = '\n';
    memcpy(text + n + 1, MOUNT_V2, sizeof MOUNT_V2);
    write_file(f, "proc/self/cgroup", "0::/app\n");
    write_file(f, "proc/self/mountinfo", text);
    v2_cpu_max(f, "/app", "200000 100000\n");
    assert_int_equal(count(f), 2);
    free(text);
}

static void cpus_unknown_affinity_is_the_online_count(void **state)
{
    struct fixture *f = *state;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "200000 100000\n");
    assert_int_equal(serex__cpu_count_at(f->root, 0, ONLINE), ONLINE);
    assert_int_equal(serex__cpu_count_at(f->root, 0, 0), 1);
}

/* --- no memory: the online CPUs --- */

static void cpus_allocation_failure_is_the_online_count(void **state)
{
    struct fixture *f = *state;
    unsigned n = 12345;

    v2_process_in(f, "/app");
    v2_cpu_max(f, "/app", "200000 100000\n");
    serex__alloc_fail_nth(1);
    assert_int_equal(serex__cgroup_cpu_limit(f->root, &n), SEREX_ENOMEM);
    assert_int_equal(n, 0);
    serex__alloc_fail_nth(1);
    assert_int_equal(count(f), ONLINE);
    serex__alloc_fail_nth(0);
    assert_int_equal(count(f), 2);
}

/* The real count: every allocation it makes, failed in turn, gives the
 * online CPUs; none failed, the answer is the same each time. */
static void cpus_real_count_falls_back_to_online_on_each_failure(void **state)
{
    unsigned answer = serex_cpu_count(), allocs;

    (void)state;
    assert_true(answer >= 1);
    serex__alloc_fail_nth(0); /* counts from here */
    assert_int_equal(serex_cpu_count(), answer);
    allocs = (unsigned)serex__alloc_fail_nth(0);
    for (unsigned k = 1; k <= allocs; k++) {
        serex__alloc_fail_nth(k);
        assert_int_equal(serex_cpu_count(), serex__cpu_count());
    }
    serex__alloc_fail_nth(0);
}

/* On Linux, the answer is the rule applied to the thread's own mask. */
static void cpus_real_count_is_at_most_the_affinity(void **state)
{
    unsigned cpus[1];
    size_t mask = serex__thread_get_affinity(cpus, 0);
    unsigned n = serex_cpu_count();

    (void)state;
    assert_true(n >= 1);
    if (mask == 0) /* no affinity here: the online CPUs */
        assert_int_equal(n, serex__cpu_count());
    else
        assert_true(n <= mask);
}

/* --- the pool --- */

static int count_start(void *ctx, unsigned index)
{
    (void)index;
    atomic_fetch_add((atomic_uint *)ctx, 1);
    return 0;
}

static void cpus_pool_of_zero_threads_starts_serex_cpu_count(void **state)
{
    atomic_uint started = 0;
    serex_pool_config cfg = {.on_thread_start = count_start,
                             .hook_ctx = &started};
    serex_executor *pool;
    serex_stats st;
    unsigned n = serex_cpu_count();

    (void)state;
    /* create waits for its core threads' start hooks */
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    assert_int_equal(atomic_load(&started), n);
    assert_int_equal(serex_executor_stats(pool, &st), SEREX_OK);
    assert_int_equal(st.threads, n);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(cpus_v2_quota_of_one_and_a_half_is_two),
        T(cpus_v2_whole_quota_is_not_rounded_up),
        T(cpus_v2_max_is_the_affinity),
        T(cpus_quota_below_one_cpu_is_one),
        T(cpus_quota_above_the_affinity_is_the_affinity),
        T(cpus_v2_smaller_limit_in_a_parent_wins),
        T(cpus_v2_smaller_limit_in_the_child_wins),
        T(cpus_v2_limit_at_the_mount_counts),
        T(cpus_v2_walk_stops_at_the_mount_point),
        T(cpus_v2_mount_with_escaped_path_is_found),
        T(cpus_v2_mount_of_a_subtree_is_followed),
        T(cpus_v1_quota_is_read),
        T(cpus_v1_quota_minus_one_is_the_affinity),
        T(cpus_v1_container_sees_its_cgroup_as_the_mount),
        T(cpus_v1_cpu_controller_wins_over_v2),
        T(cpus_no_proc_files_is_the_affinity),
        T(cpus_no_mount_is_the_affinity),
        T(cpus_no_cpu_max_file_is_the_affinity),
        T(cpus_garbage_is_the_affinity),
        T(cpus_garbage_proc_files_are_the_affinity),
        T(cpus_overlong_lines_are_skipped),
        T(cpus_unknown_affinity_is_the_online_count),
        T(cpus_allocation_failure_is_the_online_count),
        T(cpus_real_count_falls_back_to_online_on_each_failure),
        T(cpus_real_count_is_at_most_the_affinity),
        T(cpus_pool_of_zero_threads_starts_serex_cpu_count),
    };
#undef T

    return cmocka_run_group_tests_name("cpus", tests, NULL, NULL);
}
