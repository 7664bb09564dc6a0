/* SPDX-License-Identifier: MIT */
/*
 * cpus.c - how many CPUs this process may use (serex_cpu_count): the
 * platform's affinity count (thread_unix.c, thread_win.c) capped by the
 * Linux cgroup CPU quota, which this file reads.
 *
 * --- The quota ---
 * A container is given CPU time, not CPUs: cgroup v2's cpu.max holds
 * "<quota> <period>" in microseconds ("max <period>": no limit), cgroup
 * v1's cpu.cfs_quota_us and cpu.cfs_period_us the same in two files
 * (quota -1: no limit). quota / period CPUs' worth of time per period, so
 * "150000 100000" is 1.5 CPUs: more threads than ceil(1.5) = 2 only
 * queue for the time slices (Go 1.25's GOMAXPROCS, libuv's
 * uv_available_parallelism after #4746). The files are found as Go finds
 * them (src/internal/runtime/cgroup):
 *   1. /proc/self/cgroup, one line per hierarchy "id:controllers:path".
 *      A v1 hierarchy whose controllers include "cpu" wins; else the v2
 *      line, "0::path". The path is the process's cgroup in it.
 *   2. /proc/self/mountinfo: the mount of that hierarchy (filesystem
 *      "cgroup" with "cpu" among its super options, or "cgroup2"), its
 *      mount point (field 5) and the root of the mount within the
 *      hierarchy (field 4; "/" unless the mount shows a subtree, as a
 *      container without a cgroup namespace sees its own cgroup). Paths
 *      there escape space, tab, newline and backslash as \ooo octal.
 *   3. The cgroup's directory is the mount point plus the path below the
 *      mount's root. A mount whose root is not above our path does not
 *      show our cgroup: the next one may.
 * A limit set on a parent applies to every cgroup below it (the kernel
 * throttles the parent's whole subtree), and a child's cpu.max does not
 * say so: so the walk goes up from our directory to the mount point,
 * reading each level's files, and the smallest limit wins (libuv walks up
 * the same way).
 *
 * Anything missing or malformed (no such file, a line too long for our
 * buffers, garbage, a period of 0) is no limit from that file: the count
 * falls back to the affinity, never fails and is never 0. The reader keeps
 * no state and allocates one scratch block per call; without it, the whole
 * count falls back to the online CPUs (serex_cpu_count's header says so).
 *
 * The reader takes a root prefixed to every path it opens, "" for the
 * real files: tests/test_cpus.c builds fake /proc and cgroup trees in a
 * temporary directory. It is plain C (stdio), so it builds, and its tests
 * run, everywhere; only Linux's serex__cpu_count calls it with "".
 */
#include "thread_internal.h"

#include <limits.h> /* UINT_MAX */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>  /* fopen, fgets */
#include <string.h> /* strlen, memcpy, strncmp, strchr, strrchr */

#include "serex/pool.h" /* serex_cpu_count */

#include "alloc_internal.h"
#include "common_internal.h"

/* The kernel's longest path (PATH_MAX), and the longest line we read:
 * a mountinfo line holds two paths that escaping can make four times
 * longer; lines longer than that are skipped. */
#define CG_PATH 4096
#define CG_LINE (8 * CG_PATH + 256)
/* The longest file name we append to a cgroup's directory, with its NUL */
#define CG_FILE sizeof "/cpu.cfs_period_us"

/* fopen's mode: "e" (O_CLOEXEC) where the C library has it, so a thread
 * that forks and execs meanwhile leaks no descriptor to the child. */
#if defined(__linux__)
#  define CG_FOPEN_MODE "re"
#else
#  define CG_FOPEN_MODE "r"
#endif

struct cg_scratch {
    char line[CG_LINE];
    char path[CG_PATH];  /* our cgroup's path, from /proc/self/cgroup */
    char mroot[CG_PATH]; /* the mount's root, unescaped */
    char mnt[CG_PATH];   /* the mount point, unescaped */
    char dir[];          /* root, mount point, path below the mount, file */
};

/* --- reading lines --- */

/*
 * The next line of @f into @buf[0..cap), without its newline. A line too
 * long for @buf is read to its end and reported as empty (it matches
 * nothing: skipped). false at the end of the file.
 */
static bool cg_next_line(FILE *f, char *buf, size_t cap)
{
    size_t n;

    if (fgets(buf, (int)cap, f) == NULL)
        return false;
    n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\n') {
        buf[n - 1] = '\0';
        return true;
    }
    if (feof(f))
        return true;                        /* a last line with no newline */
    while (fgets(buf, (int)cap, f) != NULL) /* the rest of a long line */
        if (strchr(buf, '\n') != NULL)
            break;
    buf[0] = '\0';
    return true;
}

/* true if the comma-separated @list (of @n characters) holds @word */
static bool cg_list_has(const char *list, size_t n, const char *word)
{
    size_t w = strlen(word);

    while (n > 0) {
        const char *comma = memchr(list, ',', n);
        size_t len = comma != NULL ? (size_t)(comma - list) : n;

        if (len == w && memcmp(list, word, w) == 0)
            return true;
        if (comma == NULL)
            break;
        n -= len + 1;
        list = comma + 1;
    }
    return false;
}

/* Copies the NUL-ended @src to @dst[0..cap); false if it does not fit. */
static bool cg_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);

    if (n >= cap)
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

/* Opens @root followed by @path. */
static FILE *cg_open(struct cg_scratch *s, const char *root, const char *path)
{
    size_t r = strlen(root), p = strlen(path);

    if (r + p >= sizeof s->line)
        return NULL;
    memcpy(s->line, root, r);
    memcpy(s->line + r, path, p + 1);
    return fopen(s->line, CG_FOPEN_MODE);
}

/* --- 1. our cgroup: /proc/self/cgroup --- */

/*
 * Finds the process's CPU cgroup: its path into s->path. Returns 1 (a v1
 * hierarchy with the cpu controller), 2 (the v2 hierarchy) or 0 (none).
 */
static int cg_find_cgroup(struct cg_scratch *s, const char *root)
{
    FILE *f = cg_open(s, root, "/proc/self/cgroup");
    int version = 0;

    if (f == NULL)
        return 0;
    while (version != 1 && cg_next_line(f, s->line, sizeof s->line)) {
        char *ctl = strchr(s->line, ':'), *path;

        if (ctl == NULL || (path = strchr(ctl + 1, ':')) == NULL)
            continue;
        path++;
        if (ctl - s->line == 1 && s->line[0] == '0' && path == ctl + 2) {
            /* "0::path": v2; a v1 cpu line later still wins */
            if (cg_copy(s->path, sizeof s->path, path))
                version = 2;
        } else if (cg_list_has(ctl + 1, (size_t)(path - 1 - (ctl + 1)),
                               "cpu") &&
                   cg_copy(s->path, sizeof s->path, path)) {
            version = 1;
        }
    }
    fclose(f);
    return version;
}

/* --- 2. its mount: /proc/self/mountinfo --- */

/* The next space-separated field of *@p (NUL-ended in place); NULL if
 * there is none. */
static char *cg_field(char **p)
{
    char *start = *p, *end;

    if (start == NULL || *start == '\0')
        return NULL;
    end = strchr(start, ' ');
    if (end != NULL) {
        *end = '\0';
        *p = end + 1;
    } else {
        *p = NULL;
    }
    return start;
}

/* Copies @src to @dst[0..cap), turning mountinfo's \ooo escapes back into
 * the characters; false if it does not fit or an escape is malformed. */
static bool cg_unescape(char *dst, size_t cap, const char *src)
{
    size_t n = 0;

    for (; *src != '\0'; n++) {
        if (n + 1 >= cap)
            return false;
        if (*src != '\\') {
            dst[n] = *src++;
            continue;
        }
        unsigned c = 0;
        for (int i = 1; i <= 3; i++) {
            if (src[i] < '0' || src[i] > '7')
                return false;
            c = c * 8 + (unsigned)(src[i] - '0');
        }
        if (c == 0 || c > 255)
            return false;
        dst[n] = (char)c;
        src += 4;
    }
    dst[n] = '\0';
    return true;
}

/*
 * Whether the mountinfo line in s->line is the mount of our hierarchy
 * (@version) that shows our cgroup: if so, its root and mount point are
 * in s->mroot and s->mnt.
 */
static bool cg_mount_matches(struct cg_scratch *s, int version)
{
    char *p = s->line, *root, *mnt, *f, *type;
    const char *opts;

    for (int i = 0; i < 3; i++) /* mount id, parent id, major:minor */
        if (cg_field(&p) == NULL)
            return false;
    if ((root = cg_field(&p)) == NULL || (mnt = cg_field(&p)) == NULL)
        return false;
    do /* mount options, then optional fields up to the "-" */
        f = cg_field(&p);
    while (f != NULL && strcmp(f, "-") != 0);
    if (f == NULL || (type = cg_field(&p)) == NULL || cg_field(&p) == NULL)
        return false; /* the type, the source */
    opts = p != NULL ? p : "";
    if (version == 2 ? strcmp(type, "cgroup2") != 0
                     : strcmp(type, "cgroup") != 0 ||
                           !cg_list_has(opts, strlen(opts), "cpu"))
        return false;
    return cg_unescape(s->mroot, sizeof s->mroot, root) &&
           cg_unescape(s->mnt, sizeof s->mnt, mnt);
}

/* The part of our cgroup's path below the mount's root ("" at the root),
 * or NULL if the mount does not show our cgroup. */
static const char *cg_below_mount(const struct cg_scratch *s)
{
    size_t r = strlen(s->mroot);

    if (strcmp(s->mroot, "/") == 0)
        return s->path;
    if (strncmp(s->path, s->mroot, r) != 0 ||
        (s->path[r] != '\0' && s->path[r] != '/'))
        return NULL;
    return s->path + r;
}

/*
 * Our cgroup's directory into s->dir: @root, the mount point and the path
 * below the mount, without a trailing '/'. *@base is where the mount
 * point ends in it (the walk's top). false if no mount shows our cgroup.
 */
static bool cg_find_dir(struct cg_scratch *s, const char *root, int version,
                        size_t dir_cap, size_t *base)
{
    FILE *f = cg_open(s, root, "/proc/self/mountinfo");
    bool found = false;

    if (f == NULL)
        return false;
    while (!found && cg_next_line(f, s->line, sizeof s->line)) {
        const char *below;
        size_t r = strlen(root), m, b;

        if (!cg_mount_matches(s, version) ||
            (below = cg_below_mount(s)) == NULL)
            continue;
        m = strlen(s->mnt);
        while (m > 0 && s->mnt[m - 1] == '/')
            m--;
        b = strlen(below);
        while (b > 0 && below[b - 1] == '/')
            b--;
        if (r + m + b + CG_FILE > dir_cap)
            continue;
        memcpy(s->dir, root, r);
        memcpy(s->dir + r, s->mnt, m);
        memcpy(s->dir + r + m, below, b);
        s->dir[r + m + b] = '\0';
        *base = r + m;
        found = true;
    }
    fclose(f);
    return found;
}

/* --- 3. the limits, walking up --- */

/* Parses a decimal number at *@p into *@v, moving *@p past it; false if
 * there is none or it does not fit 63 bits. */
static bool cg_number(const char **p, uint64_t *v)
{
    const char *s = *p;
    uint64_t n = 0;

    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n > (UINT64_C(1) << 62) / 5) /* n * 10 would pass 2^63 */
            return false;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *v = n;
    return true;
}

/* Reads the first line of the file s->dir + @file into @buf. */
static bool cg_read(struct cg_scratch *s, const char *file, char *buf,
                    size_t cap)
{
    size_t d = strlen(s->dir);
    FILE *f;
    bool ok;

    memcpy(s->dir + d, file, strlen(file) + 1); /* room: cg_find_dir */
    f = fopen(s->dir, CG_FOPEN_MODE);
    s->dir[d] = '\0';
    if (f == NULL)
        return false;
    ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

/* quota / period CPUs, rounded up (at least 1); 0 for no limit */
static unsigned cg_cpus(uint64_t quota, uint64_t period)
{
    uint64_t n;

    if (period == 0 || quota == 0)
        return 0; /* malformed: no limit from this file */
    n = quota / period + (quota % period != 0);
    return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

/* The limit set at the cgroup s->dir, in CPUs; 0 for none (or unknown). */
static unsigned cg_level_limit(struct cg_scratch *s, int version)
{
    char buf[64];
    const char *p = buf;
    uint64_t quota, period;

    if (version == 2) { /* "max 100000" or "150000 100000" */
        if (!cg_read(s, "/cpu.max", buf, sizeof buf) ||
            !cg_number(&p, &quota) || *p++ != ' ' || !cg_number(&p, &period))
            return 0;
        return cg_cpus(quota, period);
    }
    /* v1: quota "-1" (no limit) fails cg_number, as garbage does */
    if (!cg_read(s, "/cpu.cfs_quota_us", buf, sizeof buf) ||
        !cg_number(&p, &quota))
        return 0;
    p = buf;
    if (!cg_read(s, "/cpu.cfs_period_us", buf, sizeof buf) ||
        !cg_number(&p, &period))
        return 0;
    return cg_cpus(quota, period);
}

int serex__cgroup_cpu_limit(const char *root, unsigned *cpus)
{
    size_t dir_cap = strlen(root) + 2 * CG_PATH + CG_FILE, base = 0;
    struct cg_scratch *s = serex__alloc(sizeof *s + dir_cap);
    unsigned least = 0;
    int version;

    *cpus = 0;
    if (s == NULL)
        return SEREX_ENOMEM;
    version = cg_find_cgroup(s, root);
    if (version != 0 && cg_find_dir(s, root, version, dir_cap, &base)) {
        for (;;) { /* our cgroup, then each parent up to the mount */
            unsigned n = cg_level_limit(s, version);
            char *up;

            if (n != 0 && (least == 0 || n < least))
                least = n;
            if ((up = strrchr(s->dir + base, '/')) == NULL)
                break;
            *up = '\0';
        }
    }
    serex__free(s);
    *cpus = least;
    return SEREX_OK;
}

unsigned serex__cpu_count_at(const char *root, unsigned affinity,
                             unsigned online)
{
    unsigned limit;

    if (online == 0)
        online = 1;
    if (affinity == 0 || serex__cgroup_cpu_limit(root, &limit) != SEREX_OK)
        return online; /* no memory: see serex_cpu_count */
    if (limit != 0 && limit < affinity)
        return limit;
    return affinity;
}

unsigned serex_cpu_count(void)
{
    return serex__cpu_usable();
}
