/* SPDX-License-Identifier: MIT */
/*
 * test_json.h - a small JSON parser for tests that read back what serex
 * writes (serex_trace_write, serex_dump): tj_parse builds a tree of
 * struct tj from a NUL-terminated text, tj_free frees it, tj_get finds a
 * member of an object. Strict: any syntax error, trailing garbage or
 * nesting deeper than TJ_MAX_DEPTH gives NULL. Strings are decoded
 * (\" \\ \/ \b \f \n \r \t and \uXXXX, written out as UTF-8; a surrogate
 * pair becomes one code point), so str holds the bytes the writer meant;
 * a string with a NUL in it (\u0000) is cut at the NUL. Numbers go
 * through strtod. Header-only, malloc-based; static inline, so a file
 * that uses part of it is not warned about the rest. For tests, not for
 * untrusted input at speed.
 */
#ifndef SEREX_TEST_JSON_H
#define SEREX_TEST_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h> /* malloc, realloc, free, strtod */
#include <string.h> /* strcmp, strncmp, strlen, memset */

#define TJ_MAX_DEPTH 256

struct tj {
    enum tj_type { TJ_NULL, TJ_BOOL, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ } type;
    bool b;           /* TJ_BOOL */
    double num;       /* TJ_NUM */
    char *str;        /* TJ_STR: decoded, NUL-terminated */
    size_t n;         /* TJ_ARR, TJ_OBJ: how many items */
    struct tj *items; /* TJ_ARR: items[0..n); TJ_OBJ: the values */
    char **keys;      /* TJ_OBJ: keys[i] names items[i] */
};

struct tj_in {
    const char *p;
    int depth;
};

static inline bool tj_value(struct tj_in *in, struct tj *out);

static inline void tj_skip_ws(struct tj_in *in)
{
    while (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r')
        in->p++;
}

/* Frees what @v owns (not @v itself). */
static inline void tj_clear(struct tj *v)
{
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        tj_clear(&v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

static inline void tj_free(struct tj *v)
{
    if (v == NULL)
        return;
    tj_clear(v);
    free(v);
}

/* --- strings --- */

struct tj_buf {
    char *s;
    size_t len, cap;
};

static inline bool tj_put(struct tj_buf *b, char c)
{
    if (b->len + 1 >= b->cap) {
        size_t cap = b->cap == 0 ? 16 : b->cap * 2;
        char *s = realloc(b->s, cap);

        if (s == NULL)
            return false;
        b->s = s;
        b->cap = cap;
    }
    b->s[b->len++] = c;
    b->s[b->len] = '\0';
    return true;
}

static inline bool tj_hex4(const char *p, unsigned *out)
{
    unsigned v = 0;

    for (int i = 0; i < 4; i++) {
        char c = p[i];

        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

static inline bool tj_put_utf8(struct tj_buf *b, unsigned cp)
{
    if (cp < 0x80)
        return tj_put(b, (char)cp);
    if (cp < 0x800)
        return tj_put(b, (char)(0xC0 | (cp >> 6))) &&
               tj_put(b, (char)(0x80 | (cp & 0x3F)));
    if (cp < 0x10000)
        return tj_put(b, (char)(0xE0 | (cp >> 12))) &&
               tj_put(b, (char)(0x80 | ((cp >> 6) & 0x3F))) &&
               tj_put(b, (char)(0x80 | (cp & 0x3F)));
    return tj_put(b, (char)(0xF0 | (cp >> 18))) &&
           tj_put(b, (char)(0x80 | ((cp >> 12) & 0x3F))) &&
           tj_put(b, (char)(0x80 | ((cp >> 6) & 0x3F))) &&
           tj_put(b, (char)(0x80 | (cp & 0x3F)));
}

/* \uXXXX at in->p (past the backslash and 'u'), with its low surrogate. */
static inline bool tj_unicode(struct tj_in *in, struct tj_buf *b)
{
    unsigned cp, lo;

    if (!tj_hex4(in->p, &cp))
        return false;
    in->p += 4;
    if (cp >= 0xD800 && cp < 0xDC00) {
        if (in->p[0] != '\\' || in->p[1] != 'u' || !tj_hex4(in->p + 2, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
            return false;
        in->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
        return false; /* a low surrogate alone */
    }
    return tj_put_utf8(b, cp);
}

static inline bool tj_escape(struct tj_in *in, struct tj_buf *b)
{
    char c = *in->p++;

    switch (c) {
    case '"': return tj_put(b, '"');
    case '\\': return tj_put(b, '\\');
    case '/': return tj_put(b, '/');
    case 'b': return tj_put(b, '\b');
    case 'f': return tj_put(b, '\f');
    case 'n': return tj_put(b, '\n');
    case 'r': return tj_put(b, '\r');
    case 't': return tj_put(b, '\t');
    case 'u': return tj_unicode(in, b);
    default: return false;
    }
}

/* A string at in->p (on its opening quote): *out is malloc'd. */
static inline bool tj_string(struct tj_in *in, char **out)
{
    struct tj_buf b = {NULL, 0, 0};

    in->p++;
    if (!tj_put(&b, 'x')) /* allocates, so "" is a string too */
        return false;
    b.len = 0;
    b.s[0] = '\0';
    for (;;) {
        unsigned char c = (unsigned char)*in->p;

        if (c == '"') {
            in->p++;
            *out = b.s;
            return true;
        }
        if (c < 0x20) /* the end of the text, or a raw control byte */
            break;
        in->p++;
        if (c == '\\' ? !tj_escape(in, &b) : !tj_put(&b, (char)c))
            break;
    }
    free(b.s);
    return false;
}

/* --- numbers and literals --- */

static inline bool tj_digits(const char **p)
{
    const char *s = *p;

    while (**p >= '0' && **p <= '9')
        (*p)++;
    return *p != s;
}

/* Checks JSON's number grammar (strtod takes more: hex, inf, "1."). */
static inline bool tj_number(struct tj_in *in, struct tj *out)
{
    const char *p = in->p;
    char *end;

    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (!tj_digits(&p))
        return false;
    if (*p == '.') {
        p++;
        if (!tj_digits(&p))
            return false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!tj_digits(&p))
            return false;
    }
    out->type = TJ_NUM;
    out->num = strtod(in->p, &end);
    if (end != p)
        return false;
    in->p = p;
    return true;
}

static inline bool tj_literal(struct tj_in *in, const char *word)
{
    size_t n = strlen(word);

    if (strncmp(in->p, word, n) != 0)
        return false;
    in->p += n;
    return true;
}

/* --- arrays and objects --- */

/* Makes room for one more item (and key, for objects) in @v. */
static inline bool tj_grow(struct tj *v, size_t *cap)
{
    if (v->n < *cap)
        return true;
    size_t ncap = *cap == 0 ? 4 : *cap * 2;
    struct tj *items = realloc(v->items, ncap * sizeof *items);

    if (items == NULL)
        return false;
    v->items = items;
    if (v->type == TJ_OBJ) {
        char **keys = realloc(v->keys, ncap * sizeof *keys);

        if (keys == NULL)
            return false;
        v->keys = keys;
    }
    *cap = ncap;
    return true;
}

/* One member (`"key": value`) or one item, appended to @v. */
static inline bool tj_member(struct tj_in *in, struct tj *v, size_t *cap)
{
    char *key = NULL;

    if (!tj_grow(v, cap))
        return false;
    tj_skip_ws(in);
    if (v->type == TJ_OBJ) {
        if (*in->p != '"' || !tj_string(in, &key))
            return false;
        tj_skip_ws(in);
        if (*in->p != ':') {
            free(key);
            return false;
        }
        in->p++;
    }
    memset(&v->items[v->n], 0, sizeof v->items[v->n]);
    if (!tj_value(in, &v->items[v->n])) {
        tj_clear(&v->items[v->n]);
        free(key);
        return false;
    }
    if (v->type == TJ_OBJ)
        v->keys[v->n] = key;
    v->n++;
    return true;
}

/* An array or an object at in->p (on its bracket), into @v. */
static inline bool tj_container(struct tj_in *in, struct tj *v,
                                enum tj_type type)
{
    char close = type == TJ_ARR ? ']' : '}';
    size_t cap = 0;

    v->type = type;
    if (++in->depth > TJ_MAX_DEPTH)
        return false;
    in->p++;
    tj_skip_ws(in);
    if (*in->p == close) {
        in->p++;
        in->depth--;
        return true;
    }
    for (;;) {
        if (!tj_member(in, v, &cap))
            return false;
        tj_skip_ws(in);
        if (*in->p == close)
            break;
        if (*in->p != ',')
            return false;
        in->p++;
    }
    in->p++;
    in->depth--;
    return true;
}

static inline bool tj_value(struct tj_in *in, struct tj *out)
{
    tj_skip_ws(in);
    switch (*in->p) {
    case '{': return tj_container(in, out, TJ_OBJ);
    case '[': return tj_container(in, out, TJ_ARR);
    case '"': out->type = TJ_STR; return tj_string(in, &out->str);
    case 't':
        out->type = TJ_BOOL;
        out->b = true;
        return tj_literal(in, "true");
    case 'f': out->type = TJ_BOOL; return tj_literal(in, "false");
    case 'n': out->type = TJ_NULL; return tj_literal(in, "null");
    default: return tj_number(in, out);
    }
}

/* Parses @text (one value, surrounded by white space at most); NULL on
 * any error. Free the result with tj_free. */
static inline struct tj *tj_parse(const char *text)
{
    struct tj_in in = {text, 0};
    struct tj *v;

    if (text == NULL || (v = calloc(1, sizeof *v)) == NULL)
        return NULL;
    if (!tj_value(&in, v)) {
        tj_free(v);
        return NULL;
    }
    tj_skip_ws(&in);
    if (*in.p != '\0') {
        tj_free(v);
        return NULL;
    }
    return v;
}

/* The value of @key in object @obj: NULL if absent, or if @obj is NULL or
 * not an object. The first one, if a key repeats. */
static inline const struct tj *tj_get(const struct tj *obj, const char *key)
{
    if (obj == NULL || obj->type != TJ_OBJ)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

#endif /* SEREX_TEST_JSON_H */
